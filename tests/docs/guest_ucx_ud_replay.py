"""Runs inside the SoftRoCE guest, as the session test_defect_replays_guest.py declares (no
test_ prefix: the host's own collection leaves it out): the defects catalogue's UCX UD
destination-GID replay on the guest's UCX and rxe. Its exit status, the UCX version and its
output become JUnit properties; the host-side test judges them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

SCRIPT = (
    Path(__file__).resolve().parents[2]
    / "docs"
    / "examples"
    / "defects"
    / "ucx_ud_dgid_check_rxe.sh"
)


def test_ucx_ud_dgid_replay(record_property: Any) -> None:
    # two runs of at most ~20 s (UD_TIMEOUT 10 s) plus setup; the script bounds each process
    res = subprocess.run(["bash", str(SCRIPT), "hpc0"], capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    version = re.search(r"UCX (\S+), kernel", out)
    record_property("replay_exit", res.returncode)
    record_property("ucx_version", version.group(1) if version else "?")
    record_property("replay_output", out[-4000:])
    assert res.returncode in (0, 1), f"the replay could not tell (exit {res.returncode}):\n{out}"
