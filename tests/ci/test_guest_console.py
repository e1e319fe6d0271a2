"""A guest that dies leaves its kernel's last words: run.sh keeps the first guest's serial
console (serial-h0.log), and the kernel prints warnings there (loglevel=5), so a WARN_ON (the
siw defect's "WARNING: CPU: ... siw_cm.c") is readable after a death that left no dmesg.txt."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.guests import SERIAL, boot_exec, guest_image_or_skip

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]

MARK = "hpccomm-test: a warning before dying"


def test_a_kernel_warning_of_a_guest_that_died_is_in_its_serial_console(tmp_path: Path) -> None:
    image = guest_image_or_skip()
    # a KERN_WARNING line, then a kernel crash: panic=-1 and -no-reboot end QEMU at once
    job = boot_exec(image, tmp_path, f"echo '<4>{MARK}' >/dev/kmsg; echo c >/proc/sysrq-trigger")
    assert job.returncode == 3, job.describe()  # run.sh: no exit status from the guest
    assert not (tmp_path / "dmesg.txt").is_file(), "the guest saved its dmesg: it did not die"
    serial = (tmp_path / SERIAL).read_text(errors="replace")
    assert MARK in serial, serial[-3000:]
    assert "Kernel panic" in serial, serial[-3000:]  # the death itself, after the warning
    assert serial.index(MARK) < serial.index("Kernel panic")
    # the job's console.log holds only what the job printed: the warning is not there
    console = tmp_path / "console.log"
    assert not console.is_file() or MARK not in console.read_text(errors="replace")
