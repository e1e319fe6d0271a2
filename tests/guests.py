"""Booting the CI guests (ci/guest: QEMU, Debian's kernel with rxe and siw) from tests, and
reading what they return: the guest image (built or cached, or a skip saying why not), a boot
with pytest arguments, the guest session's JUnit XML and fingerprint.

The items of one fabric share one boot (a boot under TCG costs seconds to tens of seconds
before its job starts, by the VM): each declares the guest session it reads
(`@pytest.mark.guest(fabric, name)`, its arguments from a factory registered with
`@session(fabric, name)`), and the first of them to run boots the guest once with every
session the run selected (`run.sh --plan`), each under its own timeout and in its own results
directory (`GuestBoots`)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.bootstrap import GuestBuildFailed, GuestUnavailable, guest_image
from pytest_hpccomm.proc.jobs import JobResult, run_job

ROOT = Path(__file__).resolve().parents[1]
BUILD, RUN = ROOT / "ci" / "guest" / "build.sh", ROOT / "ci" / "guest" / "run.sh"
JOB_TIMEOUT = 900  # inside the guest; run.sh adds its boot margin, we add ours
ITEM_TIMEOUT = 300  # pytest-timeout's, per item inside the guest
# (per verbs item inside the guest: the verbs plugin's deadline, 0.8 x pytest-timeout's 300 s,
# which Hypothesis cannot swallow; pytest-timeout stays as the outer belt)


def guest_env() -> dict[str, str]:
    """run.sh's environment: TCG unless HPCCOMM_GUEST_ACCEL names another accelerator."""
    return {**os.environ, "HPCCOMM_GUEST_ACCEL": os.environ.get("HPCCOMM_GUEST_ACCEL", "tcg")}


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
    argv += ["--", f"--timeout={ITEM_TIMEOUT}", *pytest_args]
    # two guests: the second powers off up to a minute after the first
    return run_job(
        argv,
        timeout=job_timeout + 300 + 60 * (hosts - 1),
        label=f"guest {fabric} x{hosts}",
        env=guest_env(),
    )


def boot_exec(image: str, results: Path, command: str, job_timeout: int = 120) -> JobResult:
    """run.sh --exec: one guest running a shell command instead of pytest."""
    argv = ["bash", str(RUN), "--image", image, "--exec", command, "--results", str(results)]
    argv += ["--timeout", str(job_timeout)]
    return run_job(
        argv,
        timeout=job_timeout + 300,
        label="guest --exec",
        env=guest_env(),
    )


def junit(results: Path) -> dict[str, Any]:
    path = results / "junit.xml"
    assert path.is_file(), (
        f"the guest wrote no JUnit XML; console:\n{tail(results)}\nserial console:\n"
        f"{serial_tail(results if (results / SERIAL).is_file() else results.parent)}"
    )
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
    """The end of a boot's pytest log or console; for a session of a shared boot that left no
    log of its own, the boot's console."""
    for path in (results / "pytest.log", results / "console.log", results.parent / "console.log"):
        if path.is_file():
            return path.read_text(errors="replace")[-4000:]
    return "(no log)"


SERIAL = "serial-h0.log"  # the first guest's serial console (run.sh), the kernel's lines in it


def serial_tail(boot: Path, lines: int = 25) -> str:
    """The last lines of a boot's serial console: where the kernel's last words (a WARNING,
    an oops, a panic) are, when the guest died before it could save its dmesg.txt."""
    path = boot / SERIAL
    if not path.is_file():
        return f"(no {SERIAL})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


GUEST_MARKER = (
    "guest(fabric, name): the item reads guest session NAME of the shared FABRIC boot "
    "(tests/guests.py: one boot per fabric runs every selected session)"
)


@dataclass(frozen=True)
class Session:
    """One pytest session inside a shared boot: `targets` replaces the default suites,
    `stage` directories appear in the guest as /mnt/job/stage/NAME."""

    name: str
    args: tuple[str, ...] = ()
    targets: str = ""
    timeout: int = JOB_TIMEOUT
    stage: tuple[Path, ...] = ()

    def line(self) -> str:
        """The session's line of run.sh's plan."""
        for part in (self.name, self.targets, *self.args):
            assert "\t" not in part and "\n" not in part, f"a tab or newline in {part!r}"
        # tabs are IFS whitespace to run.sh's `read`: an empty field would vanish, so the
        # default targets are "-" and the arguments always come last
        args = (f"--timeout={ITEM_TIMEOUT}", *self.args)
        fields = (self.name, str(self.timeout), self.targets or "-", shlex.join(args))
        return "\t".join(fields)


@dataclass(frozen=True)
class SessionResult:
    """What one session of a shared boot left: its results directory (junit(), tail() and
    fingerprint() read it), its exit status (None: it did not finish), its seconds."""

    session: Session
    results: Path
    boot: JobResult
    returncode: int | None
    seconds: float | None
    started: bool

    def tail(self) -> str:
        """The session's pytest log, or the boot's console when the session left none."""
        return tail(self.results)

    def others(self) -> list[Path]:
        """The results directories of the boot's other sessions."""
        plan = (self.results.parent / "plan.tsv").read_text().splitlines()
        names = [line.split("\t", 1)[0] for line in plan]
        return [self.results.parent / n for n in names if n != self.session.name]

    def describe(self) -> str:
        if self.returncode is not None:
            return f"session {self.session.name}: exit status {self.returncode}"
        state = "started but did not finish" if self.started else "never started"
        return (
            f"session {self.session.name} {state}; the boot: {self.boot.describe()}; "
            f"its serial console ended:\n{serial_tail(self.results.parent)}"
        )


Factory = Callable[[Path], Session]
_FACTORIES: dict[tuple[str, str], tuple[int, Factory]] = {}


def session(fabric: str, name: str, order: int = 0) -> Callable[[Factory], Factory]:
    """Registers the factory of guest session NAME on FABRIC; it gets a directory of its own
    (for what it stages) and may skip, e.g. when what it stages cannot be built here. A boot
    runs its sessions by `order` (a session that can take the guest down goes late)."""

    def register(factory: Factory) -> Factory:
        assert (fabric, name) not in _FACTORIES, f"guest session {fabric}/{name} twice"
        _FACTORIES[(fabric, name)] = (order, factory)
        return factory

    return register


def plan_argv(image: str, results: Path, fabric: str, sessions: list[Session]) -> list[str]:
    """run.sh's argv for one boot running `sessions` one after another; writes the plan."""
    results.mkdir(parents=True, exist_ok=True)
    plan = results / "plan.tsv"
    plan.write_text("".join(s.line() + "\n" for s in sessions))
    stage = {d.name: d for s in sessions for d in s.stage}  # sessions may share one (a build)
    assert len(stage) == len({d for s in sessions for d in s.stage}), "two directories, one name"
    argv = ["bash", str(RUN), "--image", image, "--fabric", fabric, "--results", str(results)]
    argv += ["--timeout", str(plan_timeout(sessions)), "--plan", str(plan)]
    for d in stage.values():
        argv += ["--stage", str(d)]
    return argv


def plan_timeout(sessions: list[Session]) -> int:
    """The guest job's limit: each session's own, and a margin for what runs between them."""
    return sum(s.timeout + 30 for s in sessions)


def boot_plan(image: str, results: Path, fabric: str, sessions: list[Session]) -> JobResult:
    """One boot running `sessions` one after another (run.sh --plan)."""
    return run_job(
        plan_argv(image, results, fabric, sessions),
        timeout=plan_timeout(sessions) + 300,
        label=f"guest {fabric}: {', '.join(s.name for s in sessions)}",
        env=guest_env(),
    )


def session_result(session: Session, results: Path, job: JobResult) -> SessionResult:
    where = results / session.name
    rc, seconds = where / "rc", where / "seconds"
    return SessionResult(
        session=session,
        results=where,
        boot=job,
        returncode=int(rc.read_text()) if rc.is_file() else None,
        seconds=float(seconds.read_text()) if seconds.is_file() else None,
        started=(where / "started").is_file(),
    )


@dataclass
class GuestBoots:
    """The run's shared boots, one per fabric, made when the first item of a fabric asks; a
    session that cannot be made says why to each item that reads it, once per run."""

    items: list[pytest.Item]
    root: Path
    image: Callable[[], str] = guest_image_or_skip
    _done: dict[str, dict[str, SessionResult | tuple[str, str]]] = field(default_factory=dict)
    boots: dict[str, JobResult] = field(default_factory=dict)

    def summary(self) -> list[str]:
        """A line per boot (its wall time) and per session (its seconds in the guest, or why
        it has none), for the test command's time per group."""
        lines = []
        for fabric, job in self.boots.items():
            lines.append(f"{job.elapsed / 60:7.1f} min  guest {fabric} boot, exit {job.returncode}")
            for name, got in self._done[fabric].items():
                if isinstance(got, SessionResult):
                    took = "-" if got.seconds is None else f"{got.seconds / 60:.1f}"
                    lines.append(f"{took:>7} min    {got.describe()}")
                else:
                    lines.append(f"{'-':>7} min    session {name}: {got[0]}, {got[1]}")
        return lines

    def result(self, item: pytest.Item) -> SessionResult:
        """The guest session `item` declares; skips (or fails) as its making did."""
        fabric, name = marked(item)
        if fabric not in self._done:
            self._done[fabric] = self._boot(fabric)
        got = self._done[fabric][name]
        if isinstance(got, SessionResult):
            return got
        how, why = got
        if how == "skip":
            pytest.skip(why)
        pytest.fail(why, pytrace=False)

    def _boot(self, fabric: str) -> dict[str, SessionResult | tuple[str, str]]:
        names = list(dict.fromkeys(n for f, n in map(marked, self.items) if f == fabric))
        names.sort(key=lambda n: _FACTORIES[(fabric, n)][0])
        out: dict[str, SessionResult | tuple[str, str]] = {}
        try:
            image = self.image()
        except pytest.skip.Exception as exc:
            return {n: ("skip", str(exc.msg)) for n in names}
        except pytest.fail.Exception as exc:
            return {n: ("fail", str(exc.msg)) for n in names}
        sessions: list[Session] = []
        for n in names:
            try:
                factory = _FACTORIES[(fabric, n)][1]
                sessions.append(factory(self.root / f"{fabric}-stage" / n))
            except pytest.skip.Exception as exc:
                out[n] = ("skip", str(exc.msg))
            except pytest.fail.Exception as exc:
                out[n] = ("fail", str(exc.msg))
        if sessions:
            results = self.root / fabric
            try:
                job = boot_plan(image, results, fabric, sessions)
                self.boots[fabric] = job
            except Exception as exc:  # an error of ours: each item says so, none boots again
                return {
                    **out,
                    **{s.name: ("fail", f"the {fabric} boot: {exc!r}") for s in sessions},
                }
            out.update({s.name: session_result(s, results, job) for s in sessions})
        return out


class BootTimes:
    """Prints the run's shared boots at the end of the terminal summary."""

    def __init__(self) -> None:
        self.boots: GuestBoots | None = None

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.boots is not None and self.boots.boots:
            terminalreporter.write_sep("=", "shared guest boots (ci/guest/run.sh --plan)")
            for line in self.boots.summary():
                terminalreporter.write_line(line)


def marked(item: pytest.Item) -> tuple[str, str]:
    mark = item.get_closest_marker("guest")
    if mark is None:
        return "", ""
    fabric, name = mark.args
    assert (fabric, name) in _FACTORIES, f"{item.nodeid}: no guest session {fabric}/{name}"
    return str(fabric), str(name)
