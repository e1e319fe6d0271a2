"""TensorFlow's gRPC runtime, per placement:
- point to point: RecvTensor latency and bandwidth vs tensor size (TF-gRPC-Bench's
  definitions), a variable on the ps task read by the worker through a tf.function; sizes the
  session's powers of 4 (quick: 1 B - 4 MiB, 12 points); perf.py holds the definitions;
- collective: ring all-reduce (CollectiveReduceV2 over RecvBuf) of float32 tensors on two
  worker tasks, latency and busbw vs size, nccl-tests' definitions (quick: 4 B - 4 MiB, 11
  points); allreduce.py; and with the gRPC knobs TensorFlow users set (wire.KNOBS: 4 channels
  per target, gzip) at 16 B, 64 KiB and 4 MiB, beside the default's records (knob=default);
  and 64 KiB / 4 MiB split into 16 tensors packed by bytes_per_pack as MultiWorkerMirrored-
  Strategy packs gradients (one pack, about four, one per tensor): tf_allreduce_packed;
- parameter server: a ParameterServerStrategy's chief schedules steps on 2 workers, each step
  pulling 4 variables from 2 ps tasks and pushing updates back, steps/s vs variable size
  (1 KiB, 256 KiB, 4 MiB); ps.py.
The fixtures (stacks/tf/fixtures.py) pool independent jobs on the session's tasks, validate and
judge.
"""

from __future__ import annotations

import pytest

from pytest_hpccomm.stacks.tf.fixtures import RecvRun
from pytest_hpccomm.stacks.tf.plugin import TCP_ONLY

# TCP at every placement: the quick profile times it over loopback only (placement.py)
pytestmark = [
    pytest.mark.perf,
    pytest.mark.stack("tf"),
    pytest.mark.fabric("ethernet", "ipoib", why=TCP_ONLY),
    pytest.mark.quick_placements("loopback"),
]


def test_tf_recv_tensor(tf_size: int, tf_recv_tensor: RecvRun) -> None:
    tf_recv_tensor(tf_size)


def test_tf_allreduce(tf_allreduce_size: int, tf_allreduce: RecvRun) -> None:
    tf_allreduce(tf_allreduce_size)


def test_tf_ps_throughput(tf_ps_size: int, tf_ps_throughput: RecvRun) -> None:
    tf_ps_throughput(tf_ps_size)


def test_tf_allreduce_knob(tf_knob: str, tf_knob_size: int, tf_allreduce_knob: RecvRun) -> None:
    tf_allreduce_knob(tf_knob_size)


def test_tf_allreduce_packed(
    tf_packing: str, tf_pack_size: int, tf_allreduce_packed: RecvRun
) -> None:
    tf_allreduce_packed(tf_pack_size)
