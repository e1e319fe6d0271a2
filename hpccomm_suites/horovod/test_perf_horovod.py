"""hvd.allreduce latency and busbw vs message size (nccl-tests' definitions), per controller
and placement, each (size, knobs) its own judged item; the knobs users tune (cycle time,
fusion threshold) on loopback. The `horovod_allreduce` fixture (stacks/horovod/fixtures.py)
launches, pools independent jobs, validates and judges; perf.py holds the definitions.
Sizes: the session's sizes that are powers of 4 from 4 B (quick: 4 B - 4 MiB, 11 points).
"""

from __future__ import annotations

import pytest

from pytest_hpccomm.stacks.horovod.fixtures import AllreduceRun, SyntheticRun
from pytest_hpccomm.stacks.horovod.perf import KNOBS

# TCP at every placement, MPI's too (driver.py): the quick profile times it over loopback only
pytestmark = [
    pytest.mark.perf,
    pytest.mark.stack("horovod"),
    pytest.mark.fabric("ethernet", "ipoib"),
    pytest.mark.quick_placements("loopback"),
]


def test_hvd_allreduce(horovod_size: int, horovod_allreduce: AllreduceRun) -> None:
    horovod_allreduce(horovod_size, "default")


@pytest.mark.parametrize("knobs", [k for k in KNOBS if k != "default"])
def test_hvd_allreduce_knobs(
    horovod_knob_size: int, knobs: str, horovod_allreduce_loopback: AllreduceRun
) -> None:
    """Cycle time 5 ms and Tensor Fusion off, beside the default sweep's same sizes
    (perf.KNOB_SIZES: one per regime of the curve, those the session selected)."""
    horovod_allreduce_loopback(horovod_knob_size, knobs)


def test_hvd_synthetic_benchmark(horovod_model: str, horovod_synthetic: SyntheticRun) -> None:
    """Horovod's pytorch_synthetic_benchmark: images/s per rank training `horovod_model`
    (quick: a small CNN on 32x32 images; full: also ResNet-50, `slow`) through
    DistributedOptimizer, the ranks' parameters equal afterwards; with the timeline's
    negotiation and reduction milliseconds per step as records of their own."""
    horovod_synthetic(horovod_model)
