"""The end-to-end gate tests' own checks on hand-made results. The clean-run check fails where
a claim is stronger than chance over the run's points, or made without its evidence, and
passes, with a warning, a claim within the rule's designed false-alarm rate. The host-move
bracket reads the canary session's own unstretched work against its factor, retries once,
counted, and fails on a second move; the shared-cores guard does the same for a session
judged on shared cores, and only for the points asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_hpccomm import retries
from pytest_hpccomm.measure.measurement import UNSTRETCHED
from pytest_hpccomm.proc.cpu_share import CpuShare
from tests.integration._paired import (
    CLEAN_RUN_ALPHA,
    bracketed,
    clean_judged_no_change,
    host_moved,
    judged_on_shared_cores,
    on_own_cores,
    stolen_only,
)


def results(path: Path, *points: tuple[str, float | None, float | None]) -> Path:
    """One results JSON with a point per (outcome, p worse, p better)."""
    doc = {
        "results": [
            {
                "nodeid": f"t.py::test_x[p{i}]",
                "key": "k",
                "measurement": {"direction": "lower"},
                "verdict": {
                    "outcome": o,
                    "p_value": pw,
                    "p_better": pb,
                    "message": f"{o} p{i}",
                },
            }
            for i, (o, pw, pb) in enumerate(points)
        ]
    }
    path.write_text(json.dumps(doc))
    return path


def run(ret: int) -> pytest.RunResult:
    return pytest.RunResult(ret, ["session output"], [], 0.0)


def test_no_claim_passes_quietly(tmp_path: Path) -> None:
    path = results(tmp_path / "r.json", ("pass", 0.6, 0.4), ("inconclusive", 0.02, 0.9))
    clean_judged_no_change(run(0), path, 2)


def test_a_claim_within_chance_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    # the CI run that motivated the rule: an improvement at p=0.0086 among 3 points
    path = results(
        tmp_path / "r.json", ("improvement", 0.99, 0.0086), ("pass", 0.5, 0.5), ("pass", 0.5, 0.5)
    )
    with pytest.warns(UserWarning, match="within chance"):
        clean_judged_no_change(run(0), path, 3)


def test_a_claim_beyond_chance_fails(tmp_path: Path) -> None:
    p = CLEAN_RUN_ALPHA / (2 * 2) / 10
    path = results(tmp_path / "r.json", ("regression", p, 1.0), ("pass", 0.5, 0.5))
    with pytest.raises(AssertionError, match="chance explains in under"):
        clean_judged_no_change(run(1), path, 2)


def test_a_claim_without_its_evidence_fails(tmp_path: Path) -> None:
    path = results(tmp_path / "r.json", ("regression", 0.2, 0.8))
    with pytest.raises(AssertionError, match="without its evidence"):
        clean_judged_no_change(run(1), path, 1)


def test_the_exit_code_must_match_the_claims(tmp_path: Path) -> None:
    path = results(tmp_path / "r.json", ("regression", 0.005, 0.99))
    with pytest.warns(UserWarning), pytest.raises(AssertionError):
        clean_judged_no_change(run(0), path, 1)  # a regression called, yet exit 0
    path = results(tmp_path / "r.json", ("pass", 0.5, 0.5))
    with pytest.raises(AssertionError):
        clean_judged_no_change(run(1), path, 1)  # nothing called, yet exit 1


def test_a_missing_point_fails(tmp_path: Path) -> None:
    path = results(tmp_path / "r.json", ("pass", 0.5, 0.5))
    with pytest.raises(AssertionError):
        clean_judged_no_change(run(0), path, 2)


def stretched(path: Path, *points: tuple[str, float, float], reached: float = 1.5) -> Path:
    """A canary session's results: a point per (direction, its own work's move against the
    baseline as a time ratio, tolerance), against a baseline median of 10; each sample the own
    work stretched by `reached`."""
    docs = []
    for i, (d, move, t) in enumerate(points):
        lower = d == "lower"
        work = 10.0 * move if lower else 10.0 / move
        samples = [work * reached if lower else work / reached] * 3
        docs.append(
            {
                "nodeid": f"t.py::test_x[p{i}]",
                "key": "k",
                "measurement": {"direction": d, "samples": samples, "extra": {UNSTRETCHED: work}},
                "verdict": {"outcome": "inconclusive", "baseline_median": 10.0, "tolerance": t},
            }
        )
    path.write_text(json.dumps({"results": docs}))
    return path


def test_host_moved_reads_the_edge_the_canary_survives(tmp_path: Path) -> None:
    # a 1.5x canary and a 10 % band: a time's known answer holds where the canary session's
    # own work took more than 1.1 / 1.5 = 0.733x the baseline's time (the CI run that
    # motivated it: 0.709x at 1 KiB, 1.063x shown), a rate's likewise; a slower host only helps
    path = stretched(
        tmp_path / "r.json",
        ("lower", 0.709, 0.1),
        ("lower", 0.742, 0.1),
        ("lower", 1.9, 0.1),
        ("higher", 0.72, 0.1),
        ("higher", 2.0, 0.1),
    )
    moved = host_moved(path, 1.5)
    assert [m.split(":", 1)[0] for m in moved] == ["p0]", "p3]"], moved
    assert "own work took 0.709x the baseline's time" in moved[0]
    assert "shows at most 1.063x, not beyond the band's 1.100x" in moved[0]
    assert "own work took 0.720x" in moved[1]
    assert host_moved(stretched(tmp_path / "q.json", ("lower", 0.709, 0.1), reached=2.0), 2.0) == []


def test_host_moved_fails_where_the_stretch_did_not_reach_the_measurement(
    tmp_path: Path,
) -> None:
    short = stretched(tmp_path / "r.json", ("lower", 1.0, 0.1), reached=1.2)
    with pytest.raises(AssertionError, match=r"1.200x its own work, short of 1.5x"):
        host_moved(short, 1.5)
    doc = json.loads(short.read_text())
    doc["results"][0]["measurement"]["extra"] = {}
    short.write_text(json.dumps(doc))
    with pytest.raises(AssertionError, match="no unstretched reading"):
        host_moved(short, 1.5)


def test_bracketed_runs_again_once_counted_and_fails_on_a_second_move(
    tmp_path: Path, retry_ledger: list[retries.Retry]
) -> None:
    moves = iter([0.6, 1.0, 0.6, 0.65])
    canary = tmp_path / "canary.json"
    runs: list[int] = []

    def sessions() -> int:
        stretched(canary, ("lower", next(moves), 0.1))
        runs.append(len(runs))
        return runs[-1]

    assert bracketed(sessions, canary, 1.5) == 1  # the second run's
    assert [r.cause for r in retry_ledger] == [retries.HOST_MOVED]
    assert "took 0.600x" in retry_ledger[0].reason
    with pytest.raises(pytest.fail.Exception, match="twice in a row.*0.600x.*then.*0.650x"):
        bracketed(sessions, canary, 1.5)
    assert len(runs) == 4 and len(retry_ledger) == 2


def shared(path: Path, *informational: str) -> Path:
    """A results JSON with a point per informational text ("" for none)."""
    doc = {
        "results": [
            {
                "nodeid": f"t.py::test_x[p{i}]",
                "key": "k",
                "measurement": {"direction": "lower"},
                "verdict": {
                    "outcome": "inconclusive",
                    "informational": text,
                    # as not_evidence words it: the reason in the message too
                    "message": f"inconclusive: m [{text}]" if text else "m",
                },
            }
            for i, text in enumerate(informational)
        ]
    }
    path.write_text(json.dumps(doc))
    return path


GUARD = "baseline measured on shared cores: other processes used 0.16 of 2 cores over 0.7 s"


def test_shared_points_are_read_from_the_verdicts_and_only_among_those_asked(
    tmp_path: Path,
) -> None:
    path = shared(tmp_path / "r.json", "", GUARD)
    assert judged_on_shared_cores(path) == [f"p1]: {GUARD}"]
    assert judged_on_shared_cores(path, lambda point: point.startswith("p0")) == []


def test_a_shared_session_runs_again_once_after_a_wait_counted_and_fails_when_shared_twice(
    tmp_path: Path, retry_ledger: list[retries.Retry]
) -> None:
    path = tmp_path / "r.json"
    reads = iter([GUARD, "", GUARD, GUARD.replace("0.16", "0.30")])
    runs: list[int] = []
    waits: list[int] = []

    def sessions() -> int:
        shared(path, next(reads))
        runs.append(len(runs))
        return runs[-1]

    def wait() -> str:
        waits.append(1)
        return "cores shared: still"

    assert on_own_cores(sessions, path, wait=wait) == 1  # the second try's
    assert [r.cause for r in retry_ledger] == [retries.SESSION_SHARED]
    assert "0.16 of 2 cores" in retry_ledger[0].reason and len(waits) == 1
    with pytest.raises(
        pytest.fail.Exception, match="both tries.*0.16 of 2.*still shared before it.*0.30 of 2"
    ):
        on_own_cores(sessions, path, wait=wait)
    assert len(runs) == 4 and len(retry_ledger) == 2 and len(waits) == 2
    shared(path, "")
    assert on_own_cores(lambda: 7, path, wait=wait) == 7 and len(waits) == 2  # quiet: once


def reading(foreign: float, steal: float) -> str:
    """The guard's own words for a share (CpuShare.disturbed), so the parser follows them."""
    own = 1.0
    return CpuShare(
        wall=1.0, cpus=2, busy_cores=own + foreign, own_cores=own, steal_cores=steal
    ).disturbed


def test_a_share_the_hypervisors_steal_accounts_for_is_read_as_stolen_only() -> None:
    assert stolen_only(reading(0.22, 0.26))  # the CI machine's: steal above the foreign share
    assert stolen_only(reading(0.30, 0.21))  # 0.09 left to this machine's processes: quiet
    assert not stolen_only(reading(0.30, 0.15))  # 0.15 by a process here: a neighbour
    assert not stolen_only(reading(0.40, 0.0))  # no steal printed at all
    assert not stolen_only("cores shared with other processes")  # no reading: not assumed
    # every reading of a joined text counts, a baseline's as the guard quotes it too
    both = f"p0]: {reading(0.22, 0.26)}; p1]: baseline measured on shared cores: " + reading(
        0.3, 0.1
    ).removeprefix("cores shared: ")
    assert not stolen_only(both)


def test_stolen_cores_twice_check_the_gates_refusal_and_skip(
    tmp_path: Path, retry_ledger: list[retries.Retry]
) -> None:
    path = tmp_path / "r.json"
    stolen = reading(0.22, 0.26)

    def sessions() -> int:
        shared(path, "", stolen)
        return 0

    with pytest.raises(pytest.skip.Exception, match="cores stolen by the hypervisor in both"):
        on_own_cores(sessions, path, wait=lambda: "")
    assert [r.cause for r in retry_ledger] == [retries.SESSION_SHARED]

    def claimed() -> int:  # the gate called a regression on those cores: not its refusal
        doc = json.loads(shared(path, stolen).read_text())
        doc["results"][0]["verdict"].update(outcome="regression", message="regression: x")
        path.write_text(json.dumps(doc))
        return 0

    with pytest.raises(AssertionError, match="judged on shared cores, yet regression"):
        on_own_cores(claimed, path, wait=lambda: "")

    neighbour = reading(0.40, 0.05)  # a process of this machine: the test fails, no skip
    with pytest.raises(pytest.fail.Exception, match="both tries"):
        on_own_cores(lambda: shared(path, neighbour) and 0, path, wait=lambda: "")
