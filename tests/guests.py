"""Booting the CI guests (ci/guest: QEMU, Debian's kernel with rxe and siw) from tests, and
reading what they return: the guest image (built or cached, or a skip saying why not), a boot
with pytest arguments, the guest session's JUnit XML and fingerprint."""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.bootstrap import GuestBuildFailed, GuestUnavailable, guest_image
from pytest_hpccomm.proc.jobs import JobResult, run_job

ROOT = Path(__file__).resolve().parents[1]
BUILD, RUN = ROOT / "ci" / "guest" / "build.sh", ROOT / "ci" / "guest" / "run.sh"
JOB_TIMEOUT = 900  # inside the guest; run.sh adds its boot margin, we add ours
# (per verbs item inside the guest: the verbs plugin's deadline, 0.8 x pytest-timeout's 300 s,
# which Hypothesis cannot swallow; pytest-timeout stays as the outer belt)


def guest_image_or_skip() -> str:
    """The built guest image's directory; skips when this host cannot build or boot it."""
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86 is not installed (apt-get install qemu-system-x86)")
    try:
        return guest_image(BUILD)[0]
    except GuestUnavailable as exc:
        pytest.skip(str(exc))
    except GuestBuildFailed as exc:
        pytest.fail(f"guest build failed: {exc}", pytrace=False)


def boot(
    image: str,
    results: Path,
    fabric: str,
    *pytest_args: str,
    hosts: int = 1,
    job_timeout: int = JOB_TIMEOUT,
    targets: str = "",
    stage: tuple[Path, ...] = (),
) -> JobResult:
    """run.sh: `targets` replaces the default suites; `stage` directories appear in the guest
    as /mnt/job/stage/NAME."""
    argv = [
        "bash",
        str(RUN),
        "--image",
        image,
        "--fabric",
        fabric,
        "--results",
        str(results),
        "--timeout",
        str(job_timeout),
        "--hosts",
        str(hosts),
    ]
    if targets:
        argv += ["--targets", targets]
    for d in stage:
        argv += ["--stage", str(d)]
    argv += ["--", "--timeout=300", *pytest_args]
    # two guests: the second powers off up to a minute after the first
    return run_job(
        argv,
        timeout=job_timeout + 300 + 60 * (hosts - 1),
        label=f"guest {fabric} x{hosts}",
        env={**os.environ, "HPCCOMM_GUEST_ACCEL": os.environ.get("HPCCOMM_GUEST_ACCEL", "tcg")},
    )


def junit(results: Path) -> dict[str, Any]:
    path = results / "junit.xml"
    assert path.is_file(), f"the guest wrote no JUnit XML; console:\n{tail(results)}"
    cases = ET.parse(path).getroot().iter("testcase")
    out: dict[str, Any] = {"passed": [], "failed": {}, "skipped": {}, "xfailed": {}}
    for case in cases:
        name = f"{case.get('classname')}::{case.get('name')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            out["failed"][name] = f"{bad.get('message', '')} {bad.text or ''}"
        elif skipped is not None and skipped.get("type") == "pytest.xfail":
            out["xfailed"][name] = skipped.get("message", "")
        elif skipped is not None:
            out["skipped"][name] = skipped.get("message", "")
        else:
            out["passed"].append(name)
    return out


def fingerprint(results: Path) -> dict[str, Any]:
    """The guest session's environment fingerprint (results.json): kernel, driver, device."""
    path = results / "results.json"
    if not path.is_file():
        return {}
    return dict(json.loads(path.read_text()).get("session", {}).get("fingerprint") or {})


def tail(results: Path) -> str:
    for name in ("pytest.log", "console.log"):
        path = results / name
        if path.is_file():
            return path.read_text(errors="replace")[-4000:]
    return "(no log)"
