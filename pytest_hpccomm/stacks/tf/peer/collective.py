"""TensorFlow peer, collective mode: every worker task is a client of its own (multi-worker
training's shape, as MultiWorkerMirroredStrategy sets it up) and runs TensorFlow's collective
ops, whose ring all-reduce moves chunks between tasks with the RecvBuf RPC over TensorFlow's
own gRPC. Every worker gets the same request at once; the orchestrator assigns the collective
instance keys, so the tasks agree on them.

An error in a collective aborts the task's collective executor ("Restart your program to
reset"): the orchestrator ends the tasks after any failed collective request. Enabling
collective ops again (`reenable`, on every worker) resets it, as the abort cases show.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_hpccomm.peer.canary import stretch
from pytest_hpccomm.peer.tensors import decode, encode
from pytest_hpccomm.stacks.tf.wire import GROUP_KEY, LEADER, REDUCE_OPS

# what TensorFlow's CollectiveReduceV2 merges/finishes with, per reduction
_MERGE_FINAL = {"SUM": ("Add", "Id"), "MEAN": ("Add", "Div")}


def enable(tf: Any, spec: Any, task_index: int, rpc_options: dict[str, Any]) -> dict[str, Any]:
    """Start this task's server with collective ops on (the leader in the server's session
    config too: without it every collective waits for its group until the timeout), its gRPC
    channels set by `rpc_options` (RPCOptions fields: the knob under test). Returns the
    RPCOptions fields TensorFlow's context holds once the server runs: what reached TF."""
    from tensorflow.core.protobuf import tensorflow_server_pb2
    from tensorflow.python.eager import context

    ctx = context.context()
    ctx.configure_collective_ops(collective_leader=LEADER)
    config = ctx.config
    for name, value in rpc_options.items():
        setattr(config.rpc_options, name, value)
    ctx.enable_collective_ops(
        tensorflow_server_pb2.ServerDef(
            cluster=spec.as_cluster_def(),
            default_session_config=config,
            job_name="worker",
            task_index=task_index,
            protocol="grpc",
        )
    )
    # what TensorFlow keeps of the server it started (ctx.config builds a new proto on every
    # read, so it cannot show what reached the server)
    held = getattr(ctx, "_collective_ops_server_def", None)
    if held is None:
        return {"unknown": "TensorFlow keeps no _collective_ops_server_def"}
    return {f.name: v for f, v in held.default_session_config.rpc_options.ListFields()}


class CollectiveWorker:
    """A worker task's collective requests, each run by every worker of the group at once."""

    def __init__(
        self, tf: Any, task_index: int, group_size: int, reenable: Callable[[], object]
    ) -> None:
        self.tf, self.size, self.index = tf, group_size, task_index
        self.device = f"/job:worker/replica:0/task:{task_index}/device:CPU:0"
        self._reenable = reenable  # enable() again, as this task's server was started
        self._pending: _Pending | None = None  # a collective left running by a request

    def reenable(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Collective ops enabled again with the server's definition: what resets an aborted
        collective executor in a multi-worker program (upstream's multi-worker abort test).
        Every worker is asked at once: a reset worker's collectives need its peers reset."""
        self._reenable()
        return {}

    def _all_reduce(self, x: Any, op: str, key: int, timeout: float, hint: str) -> Any:
        from tensorflow.python.ops import collective_ops

        merge, final = _MERGE_FINAL[op]
        return collective_ops.all_reduce_v2(
            x,
            group_size=self.size,
            group_key=GROUP_KEY,
            instance_key=key,
            merge_op=merge,
            final_op=final,
            communication_hint=hint,
            timeout=timeout,
        )

    def allreduce(self, msg: dict[str, Any]) -> dict[str, Any]:
        """This worker's tensor all-reduced (`op` SUM or MEAN, eagerly): what this task got."""
        if msg["op_name"] not in REDUCE_OPS:
            raise ValueError(f"reduction {msg['op_name']!r}: one of {REDUCE_OPS}")
        dtype, shape, data = decode(msg["tensor"])
        with self.tf.device(self.device):
            x = self.tf.constant(np.frombuffer(data, dtype).reshape(shape))
            y = self._all_reduce(
                x,
                msg["op_name"],
                int(msg["instance_key"]),
                float(msg["timeout"]),
                str(msg.get("hint", "ring")),
            ).numpy()
        return {"result": encode(str(y.dtype), y.shape, y.tobytes())}

    def collective(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One collective of TensorFlow's collective ops tests on this worker's tensor:
        `kind` reduce (`merge` Add/Max/Min, `final` Id/Div), gather, broadcast (`root`: the
        sending task index; the others receive `shape`/`dtype`) or all_to_all; `version` 1 or
        2 (collective_ops' v1 ops or the *_v2 ones); `group_key` and `group_size` (1: a
        group of this worker alone), `hint` (communication_hint) and, v2 reduce,
        `max_subdivs_per_device`. What this task got."""
        from tensorflow.python.ops import collective_ops as co

        tf = self.tf
        dtype, shape, data = decode(msg["tensor"])
        kind, v2 = str(msg["kind"]), int(msg.get("version", 2)) == 2
        common = {
            "group_size": int(msg.get("group_size", self.size)),
            "group_key": int(msg.get("group_key", GROUP_KEY)),
            "instance_key": int(msg["instance_key"]),
            "communication_hint": str(msg.get("hint", "ring")),
            "timeout": float(msg["timeout"]),
        }
        with tf.device(self.device):
            x = tf.constant(np.frombuffer(data, dtype).reshape(shape))
            if kind == "reduce":
                merge, final = str(msg.get("merge", "Add")), str(msg.get("final", "Id"))
                if v2:
                    subdivs = int(msg.get("max_subdivs_per_device", -1))
                    y = co.all_reduce_v2(
                        x, merge_op=merge, final_op=final, max_subdivs_per_device=subdivs, **common
                    )
                else:
                    y = co.all_reduce(x, merge_op=merge, final_op=final, **common)
            elif kind == "gather":
                y = (co.all_gather_v2 if v2 else co.all_gather)(x, **common)
            elif kind == "all_to_all":
                y = co.all_to_all_v2(x, **common)
            elif kind == "broadcast":
                if int(msg["root"]) == self.index:  # the sender gets what it sent
                    if v2:
                        y = co.broadcast_send_v2(x, **common)
                    else:
                        y = co.broadcast_send(x, x.shape, x.dtype, **common)
                else:
                    recv = co.broadcast_recv_v2 if v2 else co.broadcast_recv
                    y = recv(tf.constant(shape, tf.int32) if v2 else shape, x.dtype, **common)
            else:
                raise ValueError(f"unknown collective kind {kind!r}")
            got = y.numpy()
        return {"result": encode(str(got.dtype), got.shape, got.tobytes())}

    def upstream(self, msg: dict[str, Any]) -> dict[str, Any]:
        """A case of TensorFlow's collective ops tests that is more than one op, on this
        worker (`case`: the name of one of the `_case_*` methods below)."""
        case = getattr(self, f"_case_{msg['case']}", None)
        if case is None:
            raise ValueError(f"unknown upstream case {msg['case']!r}")
        result: dict[str, Any] = case(msg)
        return result

    def _token(self) -> Any:
        """An ordering token, as TensorFlow's tests make one: a resource variable's handle."""
        from tensorflow.python.ops import resource_variable_ops

        return resource_variable_ops.ResourceVariable(1.0).handle

    def _case_ordering(self, msg: dict[str, Any]) -> dict[str, Any]:
        """OrderingTest: a tf.function (traced only) with three collectives on this device,
        the first and the third given one ordering token, the second a token of its own.
        Per op (all_reduce_v2, all_gather_v2): each collective's control inputs."""
        from tensorflow.python.ops import collective_ops as co

        tf, key = self.tf, int(msg["instance_key"])
        with tf.device(self.device):
            token = self._token()
        out: dict[str, Any] = {}
        for name in ("all_reduce_v2", "all_gather_v2"):
            op = getattr(co, name)

            def f(op: Any = op) -> None:
                with tf.device(self.device):
                    x = tf.constant([1.0])
                    op(x, self.size, GROUP_KEY, key, ordering_token=token, name="FirstChained")
                    op(x, self.size, GROUP_KEY, key, ordering_token=self._token(), name="Unchained")
                    op(x, self.size, GROUP_KEY, key + 1, ordering_token=token, name="SecondChained")

            graph = tf.function(f).get_concrete_function().graph
            out[name] = {
                n: [c.name for c in graph.get_operation_by_name(n).control_inputs]
                for n in ("FirstChained", "Unchained", "SecondChained")
            }
        return out

    def _case_invalid_input(self, msg: dict[str, Any]) -> dict[str, Any]:
        """InvalidInputTest: all_reduce_v2 and all_gather_v2 given a non-scalar group_key, a
        group_size of -2 or a non-scalar instance_key (as tensors, as upstream passes them),
        in group `group_key`. Per op and argument: the error's class and text, or None."""
        from tensorflow.python.ops import array_ops
        from tensorflow.python.ops import collective_ops as co

        tf, group, key = self.tf, int(msg["group_key"]), int(msg["instance_key"])
        bad = {
            "group_key": (self.size, [group], key),
            "group_size": (-2, group, key),
            "instance_key": (self.size, group, [key]),
        }
        out: dict[str, Any] = {}
        for name in ("all_reduce_v2", "all_gather_v2"):
            for arg, (size, gkey, ikey) in bad.items():
                got = None
                with tf.device(self.device):
                    try:
                        getattr(co, name)(
                            tf.constant([1.0]),
                            array_ops.identity(size),
                            array_ops.identity(gkey),
                            array_ops.identity(ikey),
                            ordering_token=self._token(),
                            timeout=float(msg["timeout"]),
                        )
                    except Exception as e:  # the error is the outcome under test
                        got = f"{type(e).__name__}: {e}"[:400]
                out[f"{name} {arg}"] = got
        return out

    def _case_eof_between_collectives(self, msg: dict[str, Any]) -> dict[str, Any]:
        """OpCancellationTest.testOpErrorNotAbortIfNoCollective[V2]: per op (v1 all_reduce
        and all_gather, v2 all_reduce_v2 and all_gather_v2) a collective of [1.], then a
        tf.function running the collective on the first element of a one-element dataset and
        raising OutOfRangeError at its second next(), then the collective again: an op error
        with no collective under way must not abort the collective executor. Upstream reuses
        one instance key in one process; across tasks each collective takes its own
        (`instance_key` + 3 * op + call). Per op: the tf.function's error class, and the last
        result."""
        from tensorflow.python.ops import collective_ops as co

        tf = self.tf
        ops = {
            "all_reduce": (co.all_reduce, False),
            "all_gather": (co.all_gather, False),
            "all_reduce_v2": (co.all_reduce_v2, True),
            "all_gather_v2": (co.all_gather_v2, True),
        }
        out: dict[str, Any] = {}
        for i, (name, (op, v2)) in enumerate(ops.items()):
            base = int(msg["instance_key"]) + 3 * i
            with tf.device(self.device):
                token = self._token() if v2 else None

            @tf.function
            def collective_fn(x: Any, key: int, op: Any = op, token: Any = token) -> Any:
                with tf.device(self.device):
                    extra = {"ordering_token": token} if token is not None else {}
                    return op(x, self.size, GROUP_KEY, key, timeout=float(msg["timeout"]), **extra)

            dataset = tf.data.Dataset.from_tensors([1.0])

            @tf.function
            def f(fn: Any = collective_fn, dataset: Any = dataset, key: int = base + 1) -> None:
                iterator = iter(dataset)
                fn(next(iterator), key)
                fn(next(iterator), key)  # the dataset's end: OutOfRangeError

            collective_fn(tf.constant([1.0]), base)
            try:
                f()
                error = None
            except Exception as e:  # the error is the outcome under test
                error = type(e).__name__
            got = collective_fn(tf.constant([1.0]), base + 2).numpy()
            out[name] = {"error": error, "after": got.tolist()}
        return out

    def _case_abort(self, msg: dict[str, Any]) -> dict[str, Any]:
        """AbortCollectiveOpsTest on this worker alone: `delay` s after a collective (the
        `collective` request's fields, no timeout) starts that cannot finish (no other worker
        runs it), a thread aborts the task's collective executor with upstream's
        abort_collective_ops(UNAVAILABLE, "peer down"); then the same collective again. Per
        call ("first", "after") what _timed says; "aborted": when the abort was made."""
        from tensorflow.python.eager import context
        from tensorflow.python.framework import errors

        delay = float(msg["delay"])

        aborted: list[float] = []

        def abort() -> None:
            time.sleep(delay)
            aborted.append(time.monotonic())
            context.context().abort_collective_ops(errors.UNAVAILABLE, "peer down")

        thread = threading.Thread(target=abort, daemon=True)
        thread.start()
        out: dict[str, Any] = {
            call: _timed(lambda: self.collective({**msg, "timeout": 0.0})) for call in _CALLS
        }
        thread.join()
        out["aborted"] = aborted[0]
        return out

    def _case_eof_during_collective(self, msg: dict[str, Any]) -> dict[str, Any]:
        """OpCancellationTest.testOpErrorAbortWithCollective and ...NotAbortWithCollectiveV2
        on this worker alone: a tf.function that starts a collective (`kind`, `version`,
        `instance_key`; a token for v2; no timeout) no other worker runs, then reads past the
        end of a dataset that sleeps 200 us first (upstream's: the collective is under way at
        the error). Its error and seconds ("first"); with `then` "again", the same collective
        again, `timeout` s ("after"): an error that aborted v1 collectives fails it."""
        from tensorflow.python.data.experimental.ops import testing as dataset_testing

        tf = self.tf
        v2 = int(msg["version"]) == 2
        with tf.device(self.device):
            token = self._token() if v2 else None
            x = tf.constant([1.0])
        dataset = tf.data.Dataset.from_tensors([1.0]).apply(
            dataset_testing.sleep(sleep_microseconds=200)
        )

        @tf.function
        def f() -> Any:
            ret = self._op(msg, x, 0.0, token)
            iterator = iter(dataset)
            next(iterator)
            next(iterator)  # the dataset's end: OutOfRangeError
            return ret

        out = {"first": _timed(f)}
        if msg.get("then") == "again":
            out["after"] = _timed(lambda: self._op(msg, x, float(msg["timeout"]), token))
        return out

    def _op(self, msg: dict[str, Any], x: Any, timeout: float, token: Any) -> Any:
        """all_reduce / all_gather (v1 or v2 by `version`) of x on this worker's CPU in the
        worker group, instance `instance_key`: upstream's collective_op of its cancellation
        and abort tests."""
        from tensorflow.python.ops import collective_ops as co

        v2 = int(msg["version"]) == 2
        op = {
            ("reduce", False): co.all_reduce,
            ("gather", False): co.all_gather,
            ("reduce", True): co.all_reduce_v2,
            ("gather", True): co.all_gather_v2,
        }[(str(msg["kind"]), v2)]
        extra = {"ordering_token": token} if v2 and token is not None else {}
        args = (x, self.size, int(msg.get("group_key", GROUP_KEY)), int(msg["instance_key"]))
        with self.tf.device(self.device):
            return op(*args, timeout=timeout, **extra)

    def _case_cancelable(self, msg: dict[str, Any]) -> dict[str, Any]:
        """OpCancellationTest.testCancelDuringParamResolutionV2, one worker's side: a
        tf.function asserting its input equals [1.] and then running a v2 collective (no
        token, no timeout: upstream's) of the input, called through a CancellationManager
        on this worker's `value`. `wait` true: its error and seconds. False: it runs in a
        thread of this task and the reply comes at once; `cancel_pending` cancels it."""
        from tensorflow.python.eager import cancellation
        from tensorflow.python.ops import check_ops

        tf = self.tf
        with tf.device(self.device):
            expected = tf.constant([1.0])
            x = tf.constant([float(msg["value"])])

        @tf.function
        def fn(t: Any) -> Any:
            with tf.control_dependencies([check_ops.assert_equal(t, expected)]):
                return self._op(msg, expected, 0.0, None)

        concrete = fn.get_concrete_function(x)
        manager = cancellation.CancellationManager()

        def run() -> dict[str, Any]:
            with tf.device(self.device):
                return _timed(lambda: manager.get_cancelable_function(concrete)(x))

        if msg.get("wait", True):
            return {"first": run()}
        self._pending = _Pending(manager, run)
        return {}

    def _case_cancel_pending(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The collective `cancelable` left running, cancelled (start_cancel) and waited for
        up to `timeout` s: whether it finished, and its error and seconds (from its start)."""
        if self._pending is None:
            raise ValueError("no collective is pending on this task")
        pending, self._pending = self._pending, None
        return pending.cancel(float(msg["timeout"]))

    def _case_input_pipeline(self, msg: dict[str, Any]) -> dict[str, Any]:
        """InputPipelineTest.testMap: this worker's tensor through a tf.data map whose
        function all-reduces it (all_reduce_v2, a token made in the function), fetched
        inside a tf.function: what this task got."""
        from tensorflow.python.ops import collective_ops as co

        tf = self.tf
        dtype, shape, data = decode(msg["tensor"])
        size, key = self.size, int(msg["instance_key"])

        def reduce_fn(t: Any) -> Any:
            return co.all_reduce_v2(
                t, size, GROUP_KEY, key, ordering_token=self._token(), timeout=msg["timeout"]
            )

        @tf.function
        def f() -> Any:
            with tf.device(self.device):
                x = tf.constant(np.frombuffer(data, dtype).reshape(shape))
                dataset = tf.data.Dataset.from_tensor_slices(x[None]).map(reduce_fn)
                return next(iter(dataset))

        got = f().numpy()
        return {"result": encode(str(got.dtype), got.shape, got.tobytes())}

    def _case_v3(self, msg: dict[str, Any]) -> dict[str, Any]:
        """CollectiveOpsV3Test: initialize_communicator for group `group_key` with user rank
        `rank` (this task's index unless given), then `kind` all_reduce (all_reduce_v3,
        Add), all_to_all (all_to_all_v3) or none, in one tf.function. What this task got."""
        from tensorflow.python.ops import collective_ops as co

        tf = self.tf
        dtype, shape, data = decode(msg["tensor"])
        kind, group = str(msg["kind"]), int(msg["group_key"])
        rank = int(msg.get("rank", self.index))
        timeout = float(msg["timeout"])

        @tf.function
        def f() -> Any:
            with tf.device(self.device):
                x = tf.constant(np.frombuffer(data, dtype).reshape(shape))
                handle = co.initialize_communicator(
                    group_key=group,
                    rank=rank,
                    group_size=self.size,
                    communication_hint="ring",
                    timeout_seconds=timeout,
                )
                if kind == "all_reduce":
                    return co.all_reduce_v3(handle, x, reduction="Add")
                if kind == "all_to_all":
                    return co.all_to_all_v3(handle, x)
                with tf.control_dependencies([handle]):  # run it: an unused op is pruned
                    return tf.identity(x)

        got = f().numpy()
        return {"result": encode(str(got.dtype), got.shape, got.tobytes())}

    def _scoped(self, f: Callable[[], Any]) -> Any:
        """f() with grappler's scoped allocator on (it batches CollectiveReduce's inputs, as
        upstream's while-loop tests configure their sessions), then as it was."""
        options = self.tf.config.optimizer.get_experimental_options()
        self.tf.config.optimizer.set_experimental_options({"scoped_allocator_optimization": True})
        try:
            return f()
        finally:
            self.tf.config.optimizer.set_experimental_options(options)

    def _case_while(self, msg: dict[str, Any]) -> dict[str, Any]:
        """CollectiveOpTest's while loops (v1 all_reduce, Add/Id, in a tf.function, scoped
        allocator on). `vars` > 0: variables 1, 2, 4, ... each all-reduced (as float16, as
        upstream casts) once per iteration of a while_loop of `iterations`, instance key
        `instance_key` + j. `vars` 0: upstream's testWhileWithScopedAllocator, a while_loop
        counting to 10 and a constant 5 each all-reduced, then added. What this task got."""
        from tensorflow.python.ops import collective_ops as co

        tf, size = self.tf, self.size
        nvars, iters, base = int(msg["vars"]), int(msg["iterations"]), int(msg["instance_key"])

        def reduce(x: Any, key: int) -> Any:
            return co.all_reduce(x, size, GROUP_KEY, key, "Add", "Id")

        @tf.function
        def loop() -> Any:
            with tf.device(self.device):

                def body(i: Any, *xs: Any) -> Any:
                    return (
                        i + 1,
                        *[
                            tf.cast(reduce(tf.cast(x, tf.float16), base + j), tf.float32)
                            for j, x in enumerate(xs)
                        ],
                    )

                start = [tf.constant(float(1 << j)) for j in range(nvars)]
                out = tf.while_loop(lambda i, *xs: i < iters, body, (tf.constant(0), *start))
                return tf.stack(out[1:])

        @tf.function
        def scoped() -> Any:
            with tf.device(self.device):
                zero = tf.constant(0.0)
                (counted,) = tf.while_loop(lambda i: i < 10.0, lambda i: (i + 1.0,), (zero,))
                return tf.add_n([reduce(counted, base), reduce(zero + 5.0, base + 1)])[None]

        got = self._scoped(loop if nvars else scoped).numpy()
        return {"result": encode(str(got.dtype), got.shape, got.tobytes())}

    def _case_polymorphic_gather(self, msg: dict[str, Any]) -> dict[str, Any]:
        """testCollectiveGatherPolymorphicShape: a v1 all_gather in a tf.function whose input
        is int32 of shape [None], called with this worker's tensor and then without its
        first element (one instance key): both results."""
        from tensorflow.python.ops import collective_ops as co

        tf, size, key = self.tf, self.size, int(msg["instance_key"])
        dtype, shape, data = decode(msg["tensor"])

        @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
        def gather(x: Any) -> Any:
            with tf.device(self.device):
                return co.all_gather(x, size, GROUP_KEY, key)

        x = np.frombuffer(data, dtype).reshape(shape)
        return {
            f"result{i}": encode("int32", got.shape, got.tobytes())
            for i, got in enumerate(gather(tf.constant(t)).numpy() for t in (x, x[1:]))
        }

    def _case_no_device(self, msg: dict[str, Any]) -> dict[str, Any]:
        """testCollectiveTensorsHaveNoDeviceSpecified: this worker's tensor, made on its
        CPU, passed to a tf.function whose v1 all_reduce (Add, Div) is placed on that CPU
        while the traced argument names no device. The argument's device string at trace
        time and what this task got."""
        from tensorflow.python.ops import collective_ops as co

        tf, size, key = self.tf, self.size, int(msg["instance_key"])
        dtype, shape, data = decode(msg["tensor"])
        traced: list[str] = []

        @tf.function
        def fn(x: Any) -> Any:
            traced.append(x.device)  # at trace time: a placeholder's, no device
            with tf.device(self.device):
                return co.all_reduce(x, size, GROUP_KEY, key, "Add", "Div")

        with tf.device(self.device):
            x = tf.constant(np.frombuffer(data, dtype).reshape(shape))
        got = fn(x).numpy()
        return {
            "traced_devices": traced,
            "result": encode(str(got.dtype), got.shape, got.tobytes()),
        }

    def allreduce_slices(self, msg: dict[str, Any]) -> dict[str, Any]:
        """tf.IndexedSlices all-reduced as MultiWorkerMirroredStrategy does a sparse gradient
        (CollectiveReplicaLauncher: lengths gathered, padded when they differ, gathered):
        the indices and values this task got."""
        from tensorflow.python.distribute import collective_util, cross_device_utils

        tf = self.tf
        _, ishape, idata = decode(msg["indices"])
        vtype, vshape, vdata = decode(msg["values"])
        keys = cross_device_utils.CollectiveKeys(group_key_start=int(msg["group_key"]))
        options = collective_util.Options(
            implementation="RING", timeout_seconds=float(msg["timeout"])
        )
        launcher = cross_device_utils.CollectiveReplicaLauncher(
            keys.get_group_key([self.device]), self.size, keys, self.device, options
        )
        with tf.device(self.device):
            slices = tf.IndexedSlices(
                values=tf.constant(np.frombuffer(vdata, vtype).reshape(vshape)),
                indices=tf.constant(np.frombuffer(idata, np.int64).reshape(ishape)),
                dense_shape=tf.constant(msg["dense_shape"], tf.int64),
            )
            got = launcher.all_reduce_indexed_slices(slices, options)
            indices, values = got.indices.numpy(), got.values.numpy()
        return {
            "indices": encode(str(indices.dtype), indices.shape, indices.tobytes()),
            "values": encode(str(values.dtype), values.shape, values.tobytes()),
        }

    def allreduce_bench(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Ring all-reduce of float32 tensors, per size: `batches` batches of `iters` calls of
        one tf.function after `warmup`, each batch's seconds per all-reduce (the canary
        stretches each batch, sleeping: the gRPC threads need the cores). With `tensors` and
        `packing` (a fraction of the size, 0 for one pack), the size is split into that many
        tensors reduced as MultiWorkerMirroredStrategy reduces a model's gradients: packed by
        TensorFlow's group_by_size (bytes_per_pack), one batch_all_reduce per call."""
        iters, batches, warmup = int(msg["iters"]), int(msg["batches"]), int(msg["warmup"])
        factor = float(msg.get("slowdown", 1.0))
        points = []
        for k, size in enumerate(msg["sizes"]):
            n = max(1, int(size) // 4)
            reduce, inputs, count = self._bench_function(msg, k, n)
            got = reduce(inputs)
            valid = sum(int(np.size(g)) for g in got) == count * (n // count) and all(
                bool(np.all(g.numpy() == self.size)) for g in got
            )
            for _ in range(warmup):
                reduce(inputs)
            samples, unstretched = [], []
            for _ in range(batches):
                t0 = time.perf_counter()
                for _ in range(iters):
                    reduce(inputs)
                work = time.perf_counter() - t0
                stretch(t0, factor, idle=True)
                samples.append((time.perf_counter() - t0) / iters)
                unstretched.append(work / iters)
            point: dict[str, Any] = {"bytes": 4 * n, "samples": samples, "valid": valid}
            if factor > 1.0:
                point["unstretched"] = unstretched
            points.append(point)
        return {"points": points}

    def _bench_function(
        self, msg: dict[str, Any], k: int, n: int
    ) -> tuple[Callable[[Any], list[Any]], Any, int]:
        """(the tf.function, its input, the number of tensors) of size index k, n floats."""
        tf, device, timeout = self.tf, self.device, float(msg["timeout"])
        if "packing" not in msg:
            key = int(msg["instance_key"]) + k  # one key per shape: a key's shape is fixed
            hint = str(msg.get("hint", "ring"))
            with tf.device(device):
                x = tf.ones([n], tf.float32)

            @tf.function
            def reduce(t: Any) -> Any:
                with tf.device(device):
                    return [self._all_reduce(t, "SUM", key, timeout, hint)]

            return reduce, x, 1
        from tensorflow.python.distribute import collective_util, cross_device_utils

        count = int(msg["tensors"])
        fraction = float(msg["packing"])  # 0: one pack, else at least 1 B
        bytes_per_pack = 0 if fraction == 0 else max(1, int(fraction * 4 * n))
        options = collective_util.Options(implementation="RING", timeout_seconds=timeout)
        keys = cross_device_utils.CollectiveKeys(group_key_start=int(msg["group_key"]) + k)
        launcher = cross_device_utils.CollectiveReplicaLauncher(
            keys.get_group_key([device]), self.size, keys, device, options
        )
        with tf.device(device):
            xs = [tf.ones([n // count], tf.float32) for _ in range(count)]

        @tf.function
        def reduce_packed(ts: Any) -> Any:
            with tf.device(device):  # as CollectiveAllReduce: reversed, packed, reduced
                packs = cross_device_utils.group_by_size(list(reversed(ts)), bytes_per_pack)
                return launcher.batch_all_reduce(packs, options)

        return reduce_packed, xs, count


_CALLS = ("first", "after")


def _timed(call: Callable[[], object]) -> dict[str, Any]:
    """{"error": "Class: text" (400 characters) or None, "seconds": how long call() took,
    "ended": when it returned (time.monotonic of this task)}."""
    t0 = time.monotonic()
    try:
        call()
        error = None
    except Exception as e:  # the error is the outcome under test
        error = f"{type(e).__name__}: {e}"[:400]
    ended = time.monotonic()
    return {"error": error, "seconds": ended - t0, "ended": ended}


class _Pending:
    """A collective run in a thread of its own, cancellable through its manager."""

    def __init__(self, manager: Any, run: Callable[[], dict[str, Any]]) -> None:
        self.manager, self.result = manager, {"error": "still running", "seconds": None}
        self.thread = threading.Thread(target=lambda: self.result.update(run()), daemon=True)
        self.thread.start()

    def cancel(self, timeout: float) -> dict[str, Any]:
        self.manager.start_cancel()
        self.thread.join(timeout)
        return {"finished": not self.thread.is_alive(), **self.result}
