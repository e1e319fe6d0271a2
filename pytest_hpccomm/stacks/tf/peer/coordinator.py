"""TensorFlow peer, the chief of a parameter-server cluster: a ParameterServerStrategy over the
ps and worker tasks (each a tf.distribute.Server) and a ClusterCoordinator that schedules
tf.functions on whichever worker is free, the variables living on the ps tasks (round robin).
A step pulls each variable to a worker (RecvTensor) and pushes its update back.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pytest_hpccomm.peer.canary import stretch
from pytest_hpccomm.peer.tensors import decode, encode


class Coordinator:
    """The chief's requests: train a small model, or time steps of pull-and-push."""

    def __init__(self, tf: Any, spec: Any) -> None:
        self.tf = tf
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            spec, task_type="chief", task_id=0, rpc_layer="grpc"
        )
        self.strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
        self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(self.strategy)

    def train(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Linear regression by SGD on the given batches (float64), one scheduled step at a
        time (joined before the next, so the updates apply in order): the final weights and
        bias, and the devices that held them."""
        tf, strategy = self.tf, self.strategy
        xs = [np.frombuffer(d, np.dtype(t)).reshape(s) for t, s, d in map(decode, msg["x"])]
        ys = [np.frombuffer(d, np.dtype(t)).reshape(s) for t, s, d in map(decode, msg["y"])]
        rate = float(msg["learning_rate"])
        with strategy.scope():
            w = tf.Variable(tf.zeros([xs[0].shape[1], 1], tf.float64))
            b = tf.Variable(tf.zeros([1], tf.float64))

        @tf.function
        def train_step(x: Any, y: Any) -> Any:
            def fn(x: Any, y: Any) -> Any:
                with tf.GradientTape() as tape:
                    loss = tf.reduce_mean((tf.matmul(x, w) + b - y) ** 2)
                gw, gb = tape.gradient(loss, [w, b])
                w.assign_sub(rate * gw)
                b.assign_sub(rate * gb)
                return loss

            return strategy.run(fn, args=(x, y))

        for x, y in zip(xs, ys):
            self.coordinator.schedule(train_step, args=(tf.constant(x), tf.constant(y)))
            self.coordinator.join()
        wv, bv = w.numpy(), b.numpy()
        return {
            "w": encode(str(wv.dtype), wv.shape, wv.tobytes()),
            "b": encode(str(bv.dtype), bv.shape, bv.tobytes()),
            "devices": [w.device, b.device],
        }

    def ps_bench(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Per size: `variables` float32 variables of that many bytes on the ps tasks; a step
        reads every one on a worker and pushes an update of the same size back. `batches`
        batches of `iters` steps scheduled at once and joined, after `warmup` steps: each
        batch's steps per second (the canary stretches each batch, sleeping), and the
        variables checked against the steps that ran."""
        tf, strategy = self.tf, self.strategy
        iters, batches, warmup = int(msg["iters"]), int(msg["batches"]), int(msg["warmup"])
        factor, count = float(msg.get("slowdown", 1.0)), int(msg["variables"])
        points = []
        for size in msg["sizes"]:
            n = max(1, int(size) // 4)
            with strategy.scope():
                variables = [tf.Variable(tf.zeros([n], tf.float32)) for _ in range(count)]

            @tf.function
            def step() -> Any:
                def fn() -> Any:
                    for v in variables:  # noqa: B023 (traced in this iteration)
                        v.assign_sub(v.read_value() * 0.0 + 1.0)  # pulled, then pushed back
                    return tf.constant(0)

                return strategy.run(fn)

            for _ in range(warmup):
                self.coordinator.schedule(step)
            self.coordinator.join()
            rates, unstretched = [], []
            for _ in range(batches):
                t0 = time.perf_counter()
                for _ in range(iters):
                    self.coordinator.schedule(step)
                self.coordinator.join()
                work = time.perf_counter() - t0
                stretch(t0, factor, idle=True)
                rates.append(iters / (time.perf_counter() - t0))
                unstretched.append(iters / work)
            steps = warmup + iters * batches
            valid = all(bool(np.all(v.numpy() == -float(steps))) for v in variables)
            point: dict[str, Any] = {
                "bytes": 4 * n,
                "samples": rates,
                "valid": valid,
                "devices": sorted({v.device for v in variables}),
            }
            if factor > 1.0:
                point["unstretched"] = unstretched
            points.append(point)
        return {"points": points}
