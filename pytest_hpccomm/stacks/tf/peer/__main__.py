"""TensorFlow peer: one long-lived process per task of the cluster (ps, worker), driven over the
control channel, never through the runtime under test.

    HPCCOMM_TF_CLUSTER='{"ps": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222"]}' \\
    HPCCOMM_TF_TASK=worker:0 python -m pytest_hpccomm.stacks.tf.peer

More: docs/explanation/internals.md (pytest_hpccomm.stacks.tf.peer.__main__).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any

import numpy as np

from pytest_hpccomm.peer.canary import stretch
from pytest_hpccomm.peer.tensors import decode, encode
from pytest_hpccomm.stacks.tf.wire import (
    CLIENT,
    CLUSTER_VAR,
    COLLECTIVE,
    KNOB_VAR,
    KNOBS,
    MODE_VAR,
    SESSION,
    TASK_VAR,
    parse_task,
)

CPU = "device:CPU:0"


def device(task: str) -> str:
    """'ps:0' -> '/job:ps/replica:0/task:0/device:CPU:0'."""
    job, index = parse_task(task)
    return f"/job:{job}/replica:0/task:{index}/{CPU}"


class Worker:
    """The eager client on a worker task: its requests run tf.functions across the cluster."""

    def __init__(self, tf: Any, task: str) -> None:
        self.tf, self.task, self.here = tf, task, device(task)

    def transfer(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The tensor to `msg["to"]` and back, each way inside one tf.function (a Send/Recv
        pair in each partition): what arrived there, as that task serialized it, and what came
        back here. Both must equal the input bit for bit."""
        tf = self.tf
        dtype, shape, data = decode(msg["tensor"])
        x = tf.constant(np.frombuffer(data, dtype).reshape(shape))
        there = device(str(msg["to"]))
        here = self.here

        @tf.function
        def round_trip(t: Any) -> tuple[Any, Any]:
            with tf.device(there):
                far = tf.identity(t)  # Recv on the far task
                proto = tf.io.serialize_tensor(far)  # its bytes as the far task holds them
            with tf.device(here):
                back = tf.identity(far)  # Recv here of the far task's copy
                return tf.identity(proto), back

        proto, back = round_trip(x)
        seen = tf.io.parse_tensor(proto, tf.as_dtype(dtype)).numpy()
        b = back.numpy()  # tobytes() is C order whatever the layout (ascontiguousarray is not
        # for a 0-d array: it returns one dimension)
        return {
            "there": encode(str(seen.dtype), seen.shape, seen.tobytes()),
            "back": encode(str(b.dtype), b.shape, b.tobytes()),
        }

    def recv_bench(self, msg: dict[str, Any]) -> dict[str, Any]:
        """RecvTensor from a variable on `msg["from"]`, per size: `batches` batches of `iters`
        reads after `warmup`, each batch's seconds per read (the canary stretches each batch,
        sleeping: TensorFlow's gRPC threads need the cores). A read is one tf.function call
        whose graph reads the variable there and copies it here. The first read is checked
        (what it read instead, when it was not the variable's: the point's "read")."""
        tf = self.tf
        there, here = device(str(msg["from"])), self.here
        iters, batches, warmup = int(msg["iters"]), int(msg["batches"]), int(msg["warmup"])
        factor = float(msg.get("slowdown", 1.0))
        points = []
        for size in msg["sizes"]:
            with tf.device(there):
                var = tf.Variable(tf.fill([int(size)], tf.constant(7, tf.uint8)))

            @tf.function
            def read() -> Any:
                with tf.device(here):
                    return tf.identity(var.read_value())  # noqa: B023 (traced here)

            got = read().numpy()
            valid = got.size == size and bool(np.all(got == 7))
            wrong = "" if valid else what_was_read(got, int(size), 7)
            for _ in range(warmup):
                read()
            samples, unstretched = [], []
            for _ in range(batches):
                t0 = time.perf_counter()
                for _ in range(iters):
                    read()
                work = time.perf_counter() - t0
                stretch(t0, factor, idle=True)
                samples.append((time.perf_counter() - t0) / iters)
                unstretched.append(work / iters)
            point: dict[str, Any] = {"bytes": int(size), "samples": samples, "valid": valid}
            if wrong:
                point["read"] = wrong
            if factor > 1.0:
                point["unstretched"] = unstretched
            points.append(point)
        return {"points": points}


def what_was_read(got: np.ndarray, size: int, fill: int) -> str:
    """What a read of `size` bytes of `fill` got instead: its size, where the other bytes lie
    and which values they hold (the evidence of a failed check, in one line)."""
    if got.size != size:
        return f"{got.size} bytes instead of {size}"
    wrong = np.flatnonzero(got != fill)
    values = sorted({int(v) for v in got[wrong[:4096]]})
    shown = ", ".join(map(str, values[:8])) + (", ..." if len(values) > 8 else "")
    return (
        f"{wrong.size} of {size} bytes not {fill}, bytes {int(wrong[0])}..{int(wrong[-1])}, "
        f"holding {shown}"
    )


def wait_for(addresses: list[str], timeout: float) -> None:
    """Until every address accepts a TCP connection (the ps tasks' servers are up)."""
    deadline = time.monotonic() + timeout
    for address in addresses:
        host, port = address.rsplit(":", 1)
        while True:
            try:
                socket.create_connection((host.strip("[]"), int(port)), timeout=2.0).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{address} did not accept connections in {timeout:g}s"
                    ) from None
                time.sleep(0.2)


def main() -> int:
    cluster = json.loads(os.environ[CLUSTER_VAR])
    task = os.environ[TASK_VAR]
    job, index = parse_task(task)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if os.environ.get("TMPDIR"):  # the orchestrator made it on its own host only
        os.makedirs(os.environ["TMPDIR"], 0o700, exist_ok=True)
    import tensorflow as tf  # late: the orchestrator imports this module without TensorFlow

    # tasks share 2 cores: TensorFlow's default pools are sized to the machine per process
    tf.config.threading.set_inter_op_parallelism_threads(2)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    spec = tf.train.ClusterSpec(cluster)
    worker: Any = None  # the object whose methods are this task's ops
    ops: tuple[str, ...] = ()
    server: Any = None  # held: it serves until the process ends
    rpc_options: dict[str, Any] = {}  # what TensorFlow holds of the knob (collective mode)
    if job == "ps" or (job == "worker" and "chief" in cluster):
        # held for the task's life: the server serves while this reference lives
        server = tf.distribute.Server(  # noqa: F841
            spec,
            job_name=job,
            task_index=index,
            protocol="grpc",
        )
    elif job == "chief":
        from pytest_hpccomm.stacks.tf.peer.coordinator import Coordinator

        wait_for(list(cluster["ps"]) + list(cluster["worker"]), 300.0)
        worker = Coordinator(tf, spec)
        ops = ("train", "ps_bench")
    elif os.environ.get(MODE_VAR, CLIENT) == SESSION:
        from pytest_hpccomm.stacks.tf.peer import session as session_peer

        server = tf.distribute.Server(
            spec,
            job_name=job,
            task_index=index,
            config=session_peer.server_config(tf),
            protocol="grpc",
        )
        worker = session_peer.SessionClient(tf, server.target, len(cluster["worker"]))
        ops = ("v1_reduce",)
    elif os.environ.get(MODE_VAR, CLIENT) == COLLECTIVE:
        from pytest_hpccomm.stacks.tf.peer import collective as collective_peer

        knob = KNOBS[os.environ.get(KNOB_VAR, "default")]
        rpc_options = collective_peer.enable(tf, spec, index, knob)
        worker = collective_peer.CollectiveWorker(
            tf,
            index,
            len(cluster["worker"]),
            reenable=lambda: collective_peer.enable(tf, spec, index, knob),
        )
        ops = (
            "allreduce",
            "collective",
            "upstream",
            "reenable",
            "allreduce_slices",
            "allreduce_bench",
        )
    else:
        wait_for(list(cluster.get("ps", [])), 300.0)
        tf.config.experimental_connect_to_cluster(
            spec, job_name=job, task_index=index, protocol="grpc"
        )
        worker = Worker(tf, task)
        ops = ("transfer", "recv_bench")

    from pytest_hpccomm.peer.channel import PeerClient

    def handle(msg: dict[str, Any]) -> Any:
        op = msg.get("op")
        if op in ops:
            return getattr(worker, op)(msg)
        raise ValueError(f"task {task}: unknown op {op!r}")

    with PeerClient.from_env() as client:
        client.send(
            {
                "op": "hello",
                "task": task,
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "tensorflow": tf.__version__,
                "rpc_options": rpc_options,
            }
        )
        client.serve(handle)  # until "shutdown" or the orchestrator goes away
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # a TensorFlow server cannot be stopped: end the process


if __name__ == "__main__":
    sys.exit(main())
