"""The shared guest boot's own logic (tests/guests.py, ci/guest/run.sh --plan): the job a plan
becomes, and which sessions a run's items make boot, without booting (the guest items of
tests/stacks/verbs and tests/stacks/grpc boot it for real)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.proc.jobs import JobResult
from tests import guests
from tests.guests import RUN, GuestBoots, Session


def job_commands(plan: list[Session], where: Path) -> dict[str, list[str]]:
    """Each session's pytest argv in the job.sh that run.sh would boot with, by session."""
    path = where / "plan.tsv"
    path.write_text("".join(s.line() + "\n" for s in plan))
    out = subprocess.run(
        ["bash", str(RUN), "--dry-run", "--fabric", "softroce", "--plan", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    got: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line.startswith("timeout "):
            argv = shlex.split(line.split(" 2>&1 | tee ")[0])
            name = next(a for a in argv if a.startswith("--junitxml=")).split("/")[-2]
            got[name] = argv
    return got


def test_a_plan_runs_each_session_with_its_own_targets_arguments_and_results(
    tmp_path: Path,
) -> None:
    plan = [
        Session("verbs", ("tests/stacks/verbs/test_verbs_canary_stretch.py",)),
        Session("planted", ("-m", "conformance", "-k", "a or b", "--x='q'"), timeout=700),
        Session("grpc", ("-k", "p and q"), targets="hpccomm_suites/grpc/t.py", timeout=1200),
        Session("bare"),
    ]
    got = job_commands(plan, tmp_path)
    assert list(got) == ["verbs", "planted", "grpc", "bare"]
    for s in plan:
        argv = got[s.name]
        assert argv[:4] == ["timeout", "-k", "10", str(s.timeout)], argv
        assert f"--junitxml=/mnt/job/{s.name}/junit.xml" in argv
        assert f"--hpc-results=/mnt/job/{s.name}/results.json" in argv
        assert "--hpc-fabric=softroce" in argv
        # what follows the suite name: the targets, then exactly the session's arguments
        tail = argv[argv.index(f"junit_suite_name=guest-softroce-{s.name}") + 1 :]
        want = [s.targets or "hpccomm_suites/verbs", f"--timeout={guests.ITEM_TIMEOUT}", *s.args]
        assert tail == want, (s.name, tail)


def test_a_plan_with_a_bad_name_or_beside_its_own_arguments_is_refused(tmp_path: Path) -> None:
    plan = tmp_path / "plan.tsv"
    for text, extra in (
        ("../x\t900\t-\t\n", []),
        ("x\tsoon\t-\t\n", []),
        ("x\t900\t-\t\n", ["--", "-k", "y"]),
    ):
        plan.write_text(text)
        argv = ["bash", str(RUN), "--dry-run", "--fabric", "iwarp", "--plan", str(plan), *extra]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and "run.sh:" in run.stderr, (text, extra, run)


def test_sessions_that_stage_one_directory_stage_it_once(tmp_path: Path) -> None:
    build, other = tmp_path / "build", tmp_path / "x" / "build"
    plan = [Session("a", stage=(build,)), Session("b", stage=(build,)), Session("c")]
    argv = guests.plan_argv("image", tmp_path / "r", "softroce", plan)
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--stage"] == [str(build)]
    assert (tmp_path / "r" / "plan.tsv").read_text().count("\n") == 3
    with pytest.raises(AssertionError, match="two directories, one name"):
        guests.plan_argv("image", tmp_path / "r", "softroce", [*plan, Session("d", stage=(other,))])


class Item:
    """Stands in for a pytest item: only its guest marker matters to GuestBoots."""

    def __init__(self, fabric: str | None, name: str = "") -> None:
        self.mark = pytest.mark.guest(fabric, name).mark if fabric else None
        self.nodeid = f"t::{fabric}-{name}"

    def get_closest_marker(self, _: str) -> Any:
        return self.mark


def test_each_fabric_boots_once_with_the_sessions_its_selected_items_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(guests, "_FACTORIES", {})
    guests.session("softroce", "late", order=1)(lambda d: Session("late"))
    guests.session("softroce", "early")(lambda d: Session("early", stage=(d,)))
    guests.session("softroce", "unselected")(lambda d: Session("unselected"))
    guests.session("iwarp", "early")(lambda d: Session("early"))

    def cannot(_: Path) -> Session:
        pytest.skip("no native peer here")

    guests.session("iwarp", "needs-peer")(cannot)
    boots: list[tuple[str, list[str]]] = []

    def boot_plan(image: str, results: Path, fabric: str, sessions: list[Session]) -> JobResult:
        boots.append((fabric, [s.name for s in sessions]))
        for s in sessions:
            (results / s.name).mkdir(parents=True)
            (results / s.name / "rc").write_text("0\n" if s.name == "early" else "1\n")
        (results / "plan.tsv").write_text("".join(s.line() + "\n" for s in sessions))
        return JobResult(("run.sh",), 0, "", "", 1.0, False)

    monkeypatch.setattr(guests, "boot_plan", boot_plan)
    items = [
        Item("softroce", "late"),
        Item(None),
        Item("iwarp", "needs-peer"),
        Item("softroce", "early"),
        Item("iwarp", "early"),
        Item("softroce", "late"),
    ]
    run = GuestBoots(items=items, root=tmp_path, image=lambda: "image")  # type: ignore[arg-type]
    late = run.result(items[0])  # type: ignore[arg-type]
    assert boots == [("softroce", ["early", "late"])]  # by order, once each, as selected
    assert late.returncode == 1 and late.results == tmp_path / "softroce" / "late"
    assert run.result(items[3]).returncode == 0  # type: ignore[arg-type]
    assert [p.name for p in late.others()] == ["early"]
    with pytest.raises(pytest.skip.Exception, match="no native peer here"):
        run.result(items[2])  # type: ignore[arg-type]
    assert boots[1:] == [("iwarp", ["early"])]
    run.result(items[4])  # type: ignore[arg-type]
    assert len(boots) == 2
    summary = run.summary()  # the terminal's lines: each boot, then its sessions
    assert summary[0].endswith("guest softroce boot, exit 0"), summary
    assert summary[1].endswith("session early: exit status 0"), summary
    assert summary[2].endswith("session late: exit status 1"), summary
    assert summary[3].endswith("guest iwarp boot, exit 0"), summary
    assert "session needs-peer: skip, no native peer here" in summary[4], summary


def test_a_session_that_did_not_finish_says_whether_it_started(tmp_path: Path) -> None:
    job = JobResult(("run.sh",), 3, "", "", 9.0, False)
    (tmp_path / "b" / "started").parent.mkdir()
    (tmp_path / "b" / "started").write_text("")
    (tmp_path / "console.log").write_text("[guest] the last words\n")
    a = guests.session_result(Session("a"), tmp_path, job)
    b = guests.session_result(Session("b"), tmp_path, job)
    assert a.returncode is None and "a never started" in a.describe()
    assert "b started but did not finish" in b.describe()
    assert "the last words" in b.tail()  # the boot's console: the session left no log
