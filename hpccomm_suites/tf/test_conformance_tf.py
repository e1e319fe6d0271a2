"""TensorFlow's gRPC runtime carries tensors bit for bit: every dtype and shape (empty ones
too, and one over gRPC's default 4 MiB message limit) goes from the worker to the ps task and
back inside tf.functions, each way a Send/Recv pair between the graph's partitions (the
RecvTensor RPC); what the ps task held (serialized there) and what came back must equal the
input byte for byte, NaN payloads and negative zeros included. On loopback and across the
virtual cluster (the tasks on different hosts, the bytes counted on their veths). A killed
task is an error within a bounded time, not a hang, and leaves no process behind.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_hpccomm.peer.tensors import decode, encode
from pytest_hpccomm.proc import proctree
from pytest_hpccomm.session import HpcSession
from pytest_hpccomm.stacks.tf.driver import Layout, TfError, TfTasks
from pytest_hpccomm.stacks.tf.env import TfEnv
from pytest_hpccomm.stacks.tf.fixtures import tf_site, traffic
from pytest_hpccomm.stacks.tf.plugin import TCP_ONLY
from pytest_hpccomm.stacks.tf.wire import DTYPES

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.stack("tf"),
    pytest.mark.fabric("ethernet", "ipoib", why=TCP_ONLY),
]


@st.composite
def tensors(draw: st.DrawFn) -> np.ndarray:
    dtype = np.dtype(draw(st.sampled_from(DTYPES), label="dtype"))
    shape = tuple(draw(st.lists(st.integers(0, 6), max_size=3), label="shape"))
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == np.bool_:  # a bool is one byte that must be 0 or 1
        return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool).reshape(
            shape
        )
    raw = draw(st.binary(min_size=n * dtype.itemsize, max_size=n * dtype.itemsize), label="bytes")
    return np.frombuffer(raw, dtype).reshape(shape)


def check_round_trip(tasks: TfTasks, x: np.ndarray) -> None:
    reply = tasks.request(
        "worker:0",
        {"op": "transfer", "to": "ps:0", "tensor": encode(str(x.dtype), x.shape, x.tobytes())},
    )
    for side in ("there", "back"):
        dtype, shape, data = decode(reply[side])
        what = f"{x.dtype}{list(x.shape)} worker:0 -> ps:0" + (
            " -> worker:0" if side == "back" else " (as ps:0 holds it)"
        )
        assert (dtype, tuple(shape)) == (str(x.dtype), x.shape), (
            f"{what}: arrived as {dtype}{shape}"
        )
        if data != x.tobytes():
            got = np.frombuffer(data, np.uint8)
            first = int(np.flatnonzero(got != np.frombuffer(x.tobytes(), np.uint8))[0])
            raise AssertionError(
                f"{what}: {len(data)} bytes arrived, first difference at "
                f"byte {first} (element {first // x.dtype.itemsize})"
            )


# no case of the upstream suite in whole (a part is a gap, not a claim)
@pytest.mark.covers("tf")
@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(x=tensors())
def test_tensors_cross_tasks_bit_exact(tf_tasks: TfTasks, x: np.ndarray) -> None:
    check_round_trip(tf_tasks, x)


# no case of the upstream suite in whole (a part is a gap, not a claim)
@pytest.mark.covers("tf")
def test_tensor_over_4_mib_crosses_bit_exact(tf_tasks: TfTasks) -> None:
    """5 MiB + 3 float32s of random bits: past gRPC's default message limit, which TensorFlow
    raises for its own channels."""
    rng = np.random.default_rng(20261123)
    x = rng.integers(0, 256, (5 << 20) + 12, dtype=np.uint8).view(np.float32)
    check_round_trip(tf_tasks, x)


# no case of the upstream suite in whole (a part is a gap, not a claim)
@pytest.mark.covers("tf")
def test_traffic_takes_the_fabric(
    tf_tasks: TfTasks, hpc_placement: str, hpc_session: HpcSession
) -> None:
    """A 2 MiB tensor each way crosses the network the placement names: the ps and the
    worker host's veths (netns: they are on different virtual hosts), this host's fabric
    netdev both ways (hosts: ps:0 here, worker:0 on the next host), or TCP over lo
    (loopback: not a shortcut inside one process)."""
    x = np.arange(1 << 19, dtype=np.float32)  # 2 MiB
    need = x.nbytes
    if hpc_placement == "hosts":
        assert "ps:0" in tf_tasks.local_pids() and "worker:0" not in tf_tasks.local_pids(), (
            f"ps:0 runs here and worker:0 elsewhere: {tf_tasks.hosts}"
        )
    elif hpc_placement == "netns":
        assert tf_tasks.hosts["ps:0"] != tf_tasks.hosts["worker:0"], tf_tasks.hosts
    else:
        need *= 2  # both directions cross the one lo
    with traffic(tf_tasks, hpc_session, both_ways=True) as sent:
        check_round_trip(tf_tasks, x)
    assert all(v >= need for v in sent.values()), f"bytes sent {sent}, need {need} each"


KILLED_WITHIN = 60.0  # seconds for the worker to report a killed ps task


# no case of the upstream suite in whole (a part is a gap, not a claim)
@pytest.mark.covers("tf")
def test_a_killed_task_is_an_error_not_a_hang(
    tf_env: TfEnv, hpc_placement: str, request: pytest.FixtureRequest
) -> None:
    """ps:0 SIGKILLed: the worker's next transfer to it raises (gRPC's Unavailable, as
    TensorFlow reports a dead peer) within KILLED_WITHIN seconds; once the tasks are closed no
    process of theirs is left. Own tasks: this ends them."""
    site = tf_site(hpc_placement, request)
    tasks = TfTasks(tf_env, hpc_placement, site, Layout(), request_timeout=KILLED_WITHIN)
    x = np.arange(16, dtype=np.int32)
    try:
        tasks.start()
        # on real hosts only this machine's tasks are checked (the others', by their hosts)
        procs = [p for p in map(proctree.proc_of, tasks.local_pids().values()) if p is not None]
        check_round_trip(tasks, x)  # the cluster works before the kill
        assert "ps:0" in tasks.local_pids(), f"ps:0 runs on this machine: {tasks.hosts}"
        os.kill(tasks.pids()["ps:0"], signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(TfError) as err:
            check_round_trip(tasks, x)
        took = time.monotonic() - t0
    finally:
        tasks.close()
    assert "Unavailable" in str(err.value) or "unavailable" in str(err.value), str(err.value)
    assert took < KILLED_WITHIN, f"the error took {took:.1f}s"
    left = [p.pid for p in procs if proctree.alive(p)]
    assert not left, f"processes of the tasks left behind: {left}"
