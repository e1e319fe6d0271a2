"""The timeline breakdown: Horovod's Chrome-trace events (as its TimelineWriter writes them:
metadata, then nested B/E phases per tensor) reduced to negotiation and reduction time per
step."""

from __future__ import annotations

import json

import pytest

from pytest_hpccomm.stacks.horovod.peer.timeline import covered, per_step, phases

EPOCH_US = 1_000_000_000_000_000  # the timeline's start, microseconds since the epoch


def _trace() -> list[dict[str, object]]:
    return [
        {
            "name": "process_name",
            "ph": "M",
            "pid": 0,
            "args": {"start_time_since_epoch_in_micros": EPOCH_US},
        },
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "grad.w"}},
        # step 1 (ts 0-10 ms): negotiate 2 ms, allreduce 3 ms with nested activities
        {"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 1000, "pid": 1},
        {"ph": "E", "ts": 3000, "pid": 1},
        {"ph": "B", "name": "ALLREDUCE", "ts": 4000, "pid": 1},
        {"ph": "B", "name": "MEMCPY_IN_FUSION_BUFFER", "ts": 4000, "pid": 1},
        {"ph": "E", "ts": 4500, "pid": 1},
        {"ph": "B", "name": "GLOO_ALLREDUCE", "ts": 4500, "pid": 1},
        {"ph": "E", "ts": 6900, "pid": 1},
        {"ph": "E", "ts": 7000, "pid": 1},
        {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "grad.b"}},
        # step 2 (ts 10-20 ms): a second tensor overlapping the first
        {"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 11000, "pid": 1},
        {"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 11500, "pid": 2},
        {"ph": "E", "ts": 12000, "pid": 1},
        {"ph": "E", "ts": 12500, "pid": 2},
        {"ph": "B", "name": "ALLREDUCE", "ts": 13000, "pid": 1},
        {"ph": "E", "ts": 14000, "pid": 1},
    ]


def test_nested_activities_belong_to_their_top_level_phase() -> None:
    found = phases(_trace())
    assert [(n, b - a) for n, a, b in found][:2] == [
        ("NEGOTIATE_ALLREDUCE", 2000.0),
        ("ALLREDUCE", 3000.0),
    ]
    assert all(a >= EPOCH_US for _, a, _ in found)


def test_per_step_is_the_time_covered_by_phases_begun_in_the_step() -> None:
    start = EPOCH_US / 1e6
    steps = per_step(json.dumps(_trace()), [start, start + 0.010, start + 0.020])
    assert steps[0] == pytest.approx({"negotiation_ms": 2.0, "reduction_ms": 3.0})
    # two tensors negotiating 11.0-12.0 and 11.5-12.5 ms: covered 1.5 ms, not 2
    assert steps[1] == pytest.approx({"negotiation_ms": 1.5, "reduction_ms": 1.0})


def test_covered_merges_overlaps_and_keeps_gaps() -> None:
    assert covered([(0, 2), (1, 3), (5, 6), (5.5, 5.7)]) == 4.0
    assert covered([]) == 0.0
