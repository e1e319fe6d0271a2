"""The gate status (baselines/gate.py): armed points, the reasons of the others, the line."""

from __future__ import annotations

from dataclasses import replace

from pytest_hpccomm.baselines import gate
from pytest_hpccomm.baselines.result import FUNCTIONAL, RunResult
from pytest_hpccomm.baselines.verdict import BETWEEN_SESSIONS, Outcome, Verdict
from pytest_hpccomm.measure.measurement import Direction, Measurement


def result(stack: str = "mpi", extra: dict[str, object] | None = None, **kw: object) -> RunResult:
    v = Verdict(Outcome.PASS, 1.0, 1.0, 1.0, 0.98, 1.02, 0.5, 0.05, "pass: x", min_effect=1.07)
    m = Measurement(
        stack=stack,
        benchmark="b",
        params={"size": 8},
        samples=(1.0,) * 10,
        unit="us",
        direction=Direction.LOWER_IS_BETTER,
        extra=extra or {},
    )
    return RunResult(
        nodeid="n",
        system="s",
        fabric="ethernet",
        measurement=m,
        verdict=replace(v, **kw),
        fingerprint={},
    )


def test_armed_is_a_counting_verdict_that_could_claim_twice_the_tolerance() -> None:
    assert gate.armed(result().verdict)
    assert gate.armed(result(min_effect=1.10).verdict)  # 2 x 5 %
    assert not gate.armed(result(min_effect=1.11).verdict)
    assert not gate.armed(result(informational="cores shared: x").verdict)
    assert not gate.armed(result(min_effect=None).verdict)


def test_every_unarmed_point_has_one_reason() -> None:
    cases = {
        gate.NO_BASELINE: result(outcome=Outcome.NEW, min_effect=None),
        gate.MACHINE_TYPE: result(
            informational="informational: the baseline is from another "
            "machine type (cpu_model: 'a' -> 'b')"
        ),
        gate.SHARED: result(informational="cores shared: other processes used 1 of 2 cores"),
        gate.SPREAD: result(
            min_effect=1.4,
            session_margin=0.2,
            reason=f"{BETWEEN_SESSIONS} wider than the tolerance band",
        ),
        gate.HOST: result(min_effect=1.4, host_shift=0.8),
        gate.WIDE: result(min_effect=1.4),
    }
    for why, r in cases.items():
        assert gate.unarmed_reason(r.verdict) == why


def test_the_status_line_counts_per_reason_and_says_when_the_gate_is_off() -> None:
    rs = [
        result(),
        result(min_effect=1.5),
        result(stack="grpc", outcome=Outcome.NEW, min_effect=None),
        result(extra={FUNCTIONAL: "emulated"}),
    ]  # no verdict by design: not a point
    status = gate.gate_status(rs)
    assert (status.total.points, status.total.armed) == (3, 1)
    line = gate.status_line(status)
    assert line.startswith(
        "hpccomm gate PARTLY ARMED: 1 of 3 points could claim a slowdown "
        "of 2x the tolerance (median smallest claimable slowdown 1.07x)"
    )
    assert "not armed: 1 interval too wide" in line and "1 no baseline" in line
    assert gate.stack_lines(status) == [
        "  grpc: 0 of 1 armed; 1 no baseline",
        "  mpi: 1 of 2 armed; 1 interval too wide (too few jobs or samples)",
    ]
    assert gate.required_armed(status, 0.3) == ""
    assert gate.required_armed(status, 0.5).startswith(
        "hpccomm gate: FAILED --hpc-require-armed 0.5: only 1 of 3 points (33%)"
    )
    off = gate.gate_status(
        [result(informational="informational: the baseline is from another machine type (x)")]
    )
    assert off.off and gate.status_line(off).startswith("hpccomm gate OFF: 0 of 1 points")
    assert status.to_json()["stacks"]["mpi"] == {
        "points": 2,
        "armed": 1,
        "not_armed": {"interval too wide (too few jobs or samples)": 1},
        "median_min_effect": 1.07,
    }


def test_nothing_judged_fails_a_paired_run_or_a_run_against_a_set() -> None:
    new = gate.gate_status([result(outcome=Outcome.NEW, min_effect=None)])
    assert gate.nothing_judged(new, paired=False, against_set=False) == ""  # a first run
    assert "the run against the baseline set" in gate.nothing_judged(new, False, True)
    assert "the paired A/B run" in gate.nothing_judged(new, True, False)
    assert gate.nothing_judged(gate.gate_status([result()]), True, True) == ""
