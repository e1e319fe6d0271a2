"""TensorFlow peer, session mode: TensorFlow 1's distributed runtime as in-graph replication
uses it. Every worker task runs a `tf.distribute.Server` whose config names the collective
group's leader; a v1 Session on a task's server runs one graph with ops on every worker's CPU,
the master cutting it into one partition per task (upstream's v1 collective tests run such a
graph over two CPUs of one process). A server started by the eager context for collectives
(collective mode) serves no v1 session: a session run there hangs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pytest_hpccomm.peer.tensors import decode, encode
from pytest_hpccomm.stacks.tf.wire import GROUP_KEY, LEADER


def server_config(tf: Any) -> Any:
    """A server's ConfigProto: the group leader (without it a collective waits for its group
    until it times out)."""
    config = tf.compat.v1.ConfigProto()
    config.experimental.collective_group_leader = LEADER
    return config


class SessionClient:
    """v1 graphs across the worker tasks, run through a Session on this task's server."""

    def __init__(self, tf: Any, target: str, workers: int) -> None:
        self.tf, self.target, self.workers = tf, target, workers

    def v1_reduce(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Upstream's _testCollectiveReduce and _testMultipleConcurrentCollectiveReduce: the
        workers' `tensors` (in task order) each on its worker's CPU, all-reduced by
        `instances` v1 all_reduce ops per worker (instance keys `instance_key` + i, `merge`
        and `final`), in one graph and one Session.run. `graph_key`: RunOptions'
        collective_graph_key (0 leaves it to TensorFlow); `sequential`: the session config's
        collective_deterministic_sequential_execution; `timeout`: the run's. What every op
        returned, per worker then instance."""
        from tensorflow.python.ops import collective_ops as co

        tf = self.tf
        tensors = [decode(t) for t in msg["tensors"]]
        instances, key = int(msg["instances"]), int(msg["instance_key"])
        with tf.Graph().as_default():
            outs = []
            for task, (dtype, shape, data) in enumerate(tensors):
                with tf.device(f"/job:worker/replica:0/task:{task}/device:CPU:0"):
                    x = tf.constant(np.frombuffer(data, dtype).reshape(shape))
                    outs += [
                        co.all_reduce(
                            x, self.workers, GROUP_KEY, key + i, msg["merge"], msg["final"]
                        )
                        for i in range(instances)
                    ]
            config = server_config(tf)
            config.experimental.collective_deterministic_sequential_execution = bool(
                msg["sequential"]
            )
            options = tf.compat.v1.RunOptions(timeout_in_ms=int(1000 * float(msg["timeout"])))
            if int(msg["graph_key"]):
                options.experimental.collective_graph_key = int(msg["graph_key"])
            with tf.compat.v1.Session(self.target, config=config) as session:
                got = session.run(outs, options=options)
        return {"results": [encode(str(g.dtype), g.shape, g.tobytes()) for g in got]}
