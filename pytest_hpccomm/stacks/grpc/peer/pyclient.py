"""Python clients of the tensor-transfer service (grpcio sync and grpc.aio) and the benchmark
loops they run as peers. Peer-side module; the conformance suite drives servers with
TensorClient from inside pytest.

Timing mirrors native/bench.h: warm-up, then batches whose operation count is calibrated so a
batch lasts --batch-seconds; one sample per batch (time.perf_counter around the whole batch).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

import grpc

from pytest_hpccomm.peer.canary import finish
from pytest_hpccomm.stacks.grpc import wire
from pytest_hpccomm.stacks.grpc.peer import messages as pb
from pytest_hpccomm.stacks.grpc.peer.payload import buffers_for
from pytest_hpccomm.stacks.grpc.peer.relay import RelayChannel, RelayError

CHANNEL_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


def _ser(msg: Any) -> bytes:
    data: bytes = msg.SerializeToString()
    return data


def _methods(channel: Any, mode: str) -> dict[str, Any]:
    """Multi-callables of one channel; raw mode passes bytes through untouched."""
    raw = mode == "raw"
    T = None if raw else pb.Tensors.FromString
    A = None if raw else pb.Ack.FromString
    ser = None if raw else _ser
    out = {
        "Echo": channel.unary_unary(wire.method("Echo", mode), ser, T),
        "Send": channel.unary_unary(wire.method("Send", mode), ser, A),
        "Pull": channel.unary_unary(wire.method("Pull", mode), ser, T),
        "EchoStream": channel.stream_stream(wire.method("EchoStream", mode), ser, T),
        "SendStream": channel.stream_unary(wire.method("SendStream", mode), ser, A),
        "PullStream": channel.unary_stream(wire.method("PullStream", mode), ser, T),
    }
    out["Delay"] = channel.unary_unary(wire.method("Delay"), _ser, pb.Ack.FromString)
    out["GetStats"] = channel.unary_unary(wire.method("GetStats"), _ser, pb.Stats.FromString)
    return out


def request(buffers: Sequence[wire.Buffer], mode: str, seq: int = 0) -> Any:
    if mode == "raw":
        return wire.encode_frame(buffers, seq)
    return pb.Tensors(buffers=[bytes(b) for b in buffers], seq=seq)


def want_request(sizes: Sequence[int], mode: str, seq: int = 0) -> Any:
    return wire.encode_want(sizes, seq) if mode == "raw" else pb.Tensors(want=sizes, seq=seq)


def buffers_of(resp: Any, mode: str) -> list[bytes]:
    if mode == "raw":
        return [bytes(b) for b in wire.decode_frame(resp).buffers]
    return list(resp.buffers)


def seq_of(resp: Any, mode: str) -> int:
    return wire.decode_frame(resp).seq if mode == "raw" else int(resp.seq)


def acked_bytes(resp: Any, mode: str) -> int:
    return wire.decode_ack(resp)[0] if mode == "raw" else int(resp.bytes)


def acked(resp: Any, mode: str) -> tuple[int, int, int]:
    """An Ack's (bytes, buffers, seq)."""
    if mode == "raw":
        return wire.decode_ack(resp)
    return int(resp.bytes), int(resp.buffers), int(resp.seq)


def payload_bytes(resp: Any, mode: str) -> int:
    if mode == "raw":
        return sum(wire.decode_frame(resp).lengths)
    return sum(len(b) for b in resp.buffers)


class TensorClient:
    """A sync client of one server. kwargs of the calls go to grpcio (timeout, metadata,
    compression, wait_for_ready)."""

    def __init__(
        self,
        target: str,
        mode: str = "serialized",
        *,
        credentials: grpc.ChannelCredentials | None = None,
        compression: grpc.Compression | None = None,
        options: Sequence[tuple[str, Any]] = (),
        channel: Any = None,
    ) -> None:
        """channel: one made elsewhere (a relay.RelayChannel: calls made by the native peer)."""
        self.target, self.mode = target, mode
        opts = CHANNEL_OPTIONS + list(options)
        if channel is not None:
            self.channel = channel
        elif credentials is not None:
            self.channel = grpc.secure_channel(target, credentials, opts, compression)
        else:
            self.channel = grpc.insecure_channel(target, opts, compression)
        self.m = _methods(self.channel, mode)

    def echo_call(
        self, buffers: Sequence[wire.Buffer], seq: int = 0, **kw: Any
    ) -> tuple[list[bytes], Any]:
        resp, call = self.m["Echo"].with_call(request(buffers, self.mode, seq), **kw)
        return buffers_of(resp, self.mode), call

    def echo(self, buffers: Sequence[wire.Buffer], seq: int = 0, **kw: Any) -> list[bytes]:
        return self.echo_call(buffers, seq, **kw)[0]

    def send(self, buffers: Sequence[wire.Buffer], seq: int = 0, **kw: Any) -> int:
        return acked_bytes(self.m["Send"](request(buffers, self.mode, seq), **kw), self.mode)

    def pull(self, sizes: Sequence[int], **kw: Any) -> list[bytes]:
        return buffers_of(self.m["Pull"](want_request(sizes, self.mode), **kw), self.mode)

    def stream_call(
        self, messages: Sequence[Sequence[wire.Buffer]], **kw: Any
    ) -> tuple[list[tuple[int, list[bytes]]], Any]:
        """Bidi EchoStream: message i goes out with seq i; (seq, buffers) in arrival order, and
        the call (its initial and trailing metadata)."""
        reqs = (request(b, self.mode, i) for i, b in enumerate(messages))
        return self._read_all(self.m["EchoStream"], reqs, **kw)

    def stream(
        self, messages: Sequence[Sequence[wire.Buffer]], **kw: Any
    ) -> list[tuple[int, list[bytes]]]:
        return self.stream_call(messages, **kw)[0]

    def send_stream_call(
        self, messages: Sequence[Sequence[wire.Buffer]], **kw: Any
    ) -> tuple[tuple[int, int, int], Any]:
        """Client-streaming SendStream: message i goes out with seq i; the one answer's
        (bytes, buffers, messages) the server counted, and the call."""
        reqs = (request(b, self.mode, i) for i, b in enumerate(messages))
        resp, call = self.m["SendStream"].with_call(reqs, **kw)
        return acked(resp, self.mode), call

    def send_stream(
        self, messages: Sequence[Sequence[wire.Buffer]], **kw: Any
    ) -> tuple[int, int, int]:
        return self.send_stream_call(messages, **kw)[0]

    def pull_stream_call(
        self, sizes: Sequence[int], **kw: Any
    ) -> tuple[list[tuple[int, list[bytes]]], Any]:
        """Server-streaming PullStream: one request of wanted sizes; (seq, buffers) of each
        answer in arrival order, and the call."""
        return self._read_all(self.m["PullStream"], want_request(sizes, self.mode), **kw)

    def pull_stream(self, sizes: Sequence[int], **kw: Any) -> list[tuple[int, list[bytes]]]:
        return self.pull_stream_call(sizes, **kw)[0]

    def _read_all(
        self, multi: Any, arg: Any, **kw: Any
    ) -> tuple[list[tuple[int, list[bytes]]], Any]:
        """Every answer of a call with a streamed response, and the call: grpcio's iterator is
        the call; the relay answers them all at once (relay._Streaming)."""
        if self.relayed:
            resps, call = multi.with_call(arg, **kw)
        else:
            call = multi(arg, **kw)
            resps = list(call)
        return [(seq_of(r, self.mode), buffers_of(r, self.mode)) for r in resps], call

    def delay(self, ms: int, seq: int = 0, **kw: Any) -> Any:
        return self.m["Delay"](pb.Tensors(delay_ms=ms, seq=seq), **kw)

    def cancelled_delay(self, ms: int, seq: int, after: float, **kw: Any) -> grpc.StatusCode:
        """How a Delay call of `ms` ends when the client cancels it `after` s in."""
        req = pb.Tensors(delay_ms=ms, seq=seq)
        if self.relayed:
            try:
                self.m["Delay"].with_call(req, cancel_after=after, **kw)
                return grpc.StatusCode.OK
            except RelayError as e:
                return e.code()
        fut = self.m["Delay"].future(req, **kw)
        time.sleep(after)
        fut.cancel()
        return fut.code()  # type: ignore[no-any-return]

    def cancelled_stream(self, messages: int, **kw: Any) -> tuple[int, grpc.StatusCode]:
        """(answers read, how it ended) of an EchoStream the client cancels after its first
        answer, its request side still open."""
        reqs = [request([b"x" * 10], self.mode, i) for i in range(messages)]
        if self.relayed:
            try:
                got = self.m["EchoStream"](reqs, cancel_after=0.05, **kw)
                return len(got), grpc.StatusCode.OK
            except RelayError as e:
                return len(e.answer.messages), e.code()
        done = threading.Event()

        def requests() -> Any:
            yield from reqs
            done.wait(30)  # the request side stays open until the call is cancelled

        call = self.m["EchoStream"](requests(), **kw)
        next(call)
        call.cancel()
        done.set()
        read = 1
        try:
            for _ in call:
                read += 1
        except grpc.RpcError as e:
            return read, e.code()  # type: ignore[no-any-return]
        return read, grpc.StatusCode.OK

    def stats(self, **kw: Any) -> dict[str, Any]:
        s = self.m["GetStats"](pb.StatsRequest(), **kw)
        return {
            "rpcs": s.rpcs,
            "bytes": s.bytes,
            "cancelled": s.cancelled,
            "peer": s.peer,
            "grpc_version": s.grpc_version,
            "cancelled_seqs": list(s.cancelled_seqs),
        }

    @property
    def relayed(self) -> bool:
        """Whether the native peer makes this client's calls (relay.RelayChannel)."""
        return isinstance(self.channel, RelayChannel)

    def wait_ready(self, timeout: float) -> None:
        if self.relayed:
            if not self.channel.ready(timeout):
                raise grpc.FutureTimeoutError(f"{self.target}: not connected in {timeout} s")
            return
        grpc.channel_ready_future(self.channel).result(timeout=timeout)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> TensorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- benchmark harness -----------------------------------------------------------------------


@dataclass
class Settings:
    batches: int = 12
    batch_seconds: float = 0.02
    warmup_seconds: float = 0.05
    slowdown: float = 1.0
    start_file: str = ""  # concurrent workers: segment k starts at the time in START_FILE.k


@dataclass
class Result:
    benchmark: str
    name: str
    layout: list[int]
    samples: list[float] = field(default_factory=list)
    unstretched: list[float] = field(default_factory=list)  # the canary's: from own work
    iterations: list[int] = field(default_factory=list)
    warmup: int = 0
    errors: list[str] = field(default_factory=list)


def await_start(start_file: str, segment: int, timeout: float = 60.0) -> float:
    """A barrier through the orchestrator: say READY for this segment, then wait for the
    common start time it writes (renamed into place) once every worker has said so."""
    print(wire.ready_line({"segment": segment}), flush=True)
    path = f"{start_file}.{segment}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                return float(f.read())
        except (OSError, ValueError):
            time.sleep(0.001)
    # not a BenchError: the orchestrator is gone or gave up, so the whole run ends here
    raise TimeoutError(f"no start time in {path} within {timeout:.0f}s")


def run_batches(
    op: Callable[[int], None], value: Callable[[float, int], float], s: Settings, r: Result
) -> None:
    """op(n) runs n operations back to back."""
    w0, warm = time.perf_counter(), 0
    while warm < 2 or time.perf_counter() - w0 < s.warmup_seconds:
        op(1)
        warm += 1
    r.warmup = warm
    per_op = (time.perf_counter() - w0) / warm
    n = max(1, round(s.batch_seconds / per_op))
    for _ in range(s.batches):
        t0 = time.perf_counter()
        op(n)
        took, work = finish(t0, s.slowdown)
        r.samples.append(value(took, n))
        if s.slowdown > 1.0:
            r.unstretched.append(value(work, n))
        r.iterations.append(n)


def run_synced(
    until: Callable[[float], int],
    value: Callable[[float, int], float],
    s: Settings,
    r: Result,
    segment: int = 0,
) -> None:
    """until(deadline) runs whole steps until perf_counter() >= deadline, returns how many.
    Batch windows are fixed in time from the common start, so concurrent workers' batch b
    cover the same wall-clock window and their rates add up."""
    if s.start_file:
        wait = await_start(s.start_file, segment) - time.time()
        if 0 < wait < 60:
            time.sleep(wait)
    w0 = time.perf_counter()
    r.warmup = until(w0 + s.warmup_seconds)
    start = time.perf_counter()
    for b in range(s.batches):
        t0 = time.perf_counter()
        n = max(1, until(start + s.batch_seconds * (b + 1)))
        took, work = finish(t0, s.slowdown)
        r.samples.append(value(took, n))
        if s.slowdown > 1.0:
            r.unstretched.append(value(work, n))
        r.iterations.append(n)


def _latency(sec: float, n: int) -> float:
    return sec / n * 1e6  # us per RPC


def _mb_per_s(total: int) -> Callable[[float, int], float]:
    return lambda sec, n: total / 1e6 * n / sec


def _rate(p: int) -> Callable[[float, int], float]:
    return lambda sec, n: p * n / sec  # RPCs per second (each step calls p servers)


def _step_ms(sec: float, n: int) -> float:
    return sec / n * 1e3


class BenchError(Exception):
    pass


def _plan(
    benchmark: str, sizes: list[int], p: int, mode: str
) -> tuple[list[Any], list[Any], list[int]]:
    """(push request per server, pull request per server, bytes per server). ps: every server
    gets the whole payload. mimic: TF places each variable on one PS, buffer i on server
    i % p, and a step pulls each shard from its server and pushes its gradient back."""
    if benchmark == "ps":
        req = request(buffers_for(sizes), mode, 1)
        return [req] * p, [], [sum(sizes)] * p
    shards = [sizes[j::p] for j in range(p)]
    return (
        [request(buffers_for(sh), mode, 1) for sh in shards],
        [want_request(sh, mode, 1) for sh in shards],
        [sum(sh) for sh in shards],
    )


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise BenchError(what)


Layouts = Sequence[tuple[str, list[int]]]


def run_sync(
    targets: Sequence[str], mode: str, benchmarks: Sequence[str], layouts: Layouts, s: Settings
) -> list[Result]:
    """Every (benchmark, layout) over one set of channels (one connection per server)."""
    chans = [grpc.insecure_channel(t, CHANNEL_OPTIONS) for t in targets]
    try:
        for ch in chans:
            grpc.channel_ready_future(ch).result(timeout=20)
        ms = [_methods(ch, mode) for ch in chans]
        todo = [(b, name, sizes) for b in benchmarks for name, sizes in layouts]
        return [
            bench_sync(ms, mode, b, name, sizes, s, k) for k, (b, name, sizes) in enumerate(todo)
        ]
    finally:
        for ch in chans:
            ch.close()


def bench_sync(
    ms: list[dict[str, Any]],
    mode: str,
    benchmark: str,
    name: str,
    sizes: list[int],
    s: Settings,
    segment: int = 0,
) -> Result:
    r = Result(benchmark, name, sizes)
    try:
        buffers = buffers_for(sizes)
        req, total = request(buffers, mode, 1), sum(sizes)
        if benchmark == "latency":
            echo = ms[0]["Echo"]
            _check(buffers_of(echo(req), mode) == buffers, "echo differs")  # outside timing

            def op(n: int) -> None:
                for _ in range(n):
                    echo(req)

            run_batches(op, _latency, s, r)
            _check(buffers_of(echo(req), mode) == buffers, "echo differs")
        elif benchmark == "bandwidth":
            send = ms[0]["Send"]

            def op(n: int) -> None:
                for _ in range(n):
                    _check(acked_bytes(send(req), mode) == total, "ack counts wrong bytes")

            run_batches(op, _mb_per_s(total), s, r)
        elif benchmark in ("ps", "mimic"):
            pushes, pulls, totals = _plan(benchmark, sizes, len(ms), mode)

            def step() -> None:
                if pulls:  # mimic: pull each variable from the PS holding it...
                    got = [m["Pull"].future(w) for m, w in zip(ms, pulls)]
                    _check(
                        [payload_bytes(f.result(), mode) for f in got] == totals,
                        "pulled wrong bytes",
                    )
                # ...then push the gradients; ps: every server gets the whole payload
                acks = [m["Send"].future(q) for m, q in zip(ms, pushes)]
                _check(
                    [acked_bytes(f.result(), mode) for f in acks] == totals,
                    "ack counts wrong bytes",
                )

            def until(deadline: float) -> int:
                n = 0
                while True:
                    step()
                    n += 1
                    if time.perf_counter() >= deadline:
                        return n

            run_synced(until, _rate(len(ms)) if benchmark == "ps" else _step_ms, s, r, segment)
        else:
            raise BenchError(f"unknown benchmark {benchmark!r}")
    except (grpc.RpcError, BenchError, wire.FrameError) as e:
        r.errors.append(f"{name}: {_describe(e)}")
    return r


def run_aio(
    targets: Sequence[str], mode: str, benchmarks: Sequence[str], layouts: Layouts, s: Settings
) -> list[Result]:
    """The same loops on grpc.aio. Each batch is one coroutine, so the event loop is entered
    once per batch, not once per RPC."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # grpc.aio looks the loop up in places

    async def setup() -> list[Any]:
        chans = [grpc.aio.insecure_channel(t, CHANNEL_OPTIONS) for t in targets]
        for ch in chans:
            await asyncio.wait_for(ch.channel_ready(), 20)
        return chans

    chans: list[Any] = []
    try:
        chans = loop.run_until_complete(setup())
        ms = [_methods(ch, mode) for ch in chans]
        todo = [(b, name, sizes) for b in benchmarks for name, sizes in layouts]
        return [
            bench_aio(loop, ms, mode, b, name, sizes, s, k)
            for k, (b, name, sizes) in enumerate(todo)
        ]
    finally:
        for ch in chans:
            loop.run_until_complete(ch.close())
        loop.close()


def bench_aio(
    loop: asyncio.AbstractEventLoop,
    ms: list[dict[str, Any]],
    mode: str,
    benchmark: str,
    name: str,
    sizes: list[int],
    s: Settings,
    segment: int = 0,
) -> Result:
    r = Result(benchmark, name, sizes)

    def sync(coro_fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        return lambda *a: loop.run_until_complete(coro_fn(*a))

    try:
        buffers = buffers_for(sizes)
        req, total = request(buffers, mode, 1), sum(sizes)
        if benchmark == "latency":
            echo = ms[0]["Echo"]

            async def check() -> None:
                _check(buffers_of(await echo(req), mode) == buffers, "echo differs")

            async def op(n: int) -> None:
                for _ in range(n):
                    await echo(req)

            sync(check)()
            run_batches(sync(op), _latency, s, r)
            sync(check)()
        elif benchmark == "bandwidth":
            send = ms[0]["Send"]

            async def op(n: int) -> None:
                for _ in range(n):
                    _check(acked_bytes(await send(req), mode) == total, "ack counts wrong bytes")

            run_batches(sync(op), _mb_per_s(total), s, r)
        elif benchmark in ("ps", "mimic"):
            pushes, pulls, totals = _plan(benchmark, sizes, len(ms), mode)

            async def step() -> None:
                if pulls:
                    got = await asyncio.gather(*(m["Pull"](w) for m, w in zip(ms, pulls)))
                    _check([payload_bytes(g, mode) for g in got] == totals, "pulled wrong bytes")
                acks = await asyncio.gather(*(m["Send"](q) for m, q in zip(ms, pushes)))
                _check([acked_bytes(a, mode) for a in acks] == totals, "ack counts wrong bytes")

            async def until(deadline: float) -> int:
                n = 0
                while True:
                    await step()
                    n += 1
                    if time.perf_counter() >= deadline:
                        return n

            run_synced(
                sync(until), _rate(len(ms)) if benchmark == "ps" else _step_ms, s, r, segment
            )
        else:
            raise BenchError(f"unknown benchmark {benchmark!r}")
    except (grpc.RpcError, BenchError, wire.FrameError) as e:
        r.errors.append(f"{name}: {_describe(e)}")
    return r


def _describe(e: BaseException) -> str:
    if isinstance(e, grpc.RpcError) and hasattr(e, "code"):
        return f"grpc status {e.code().name}: {e.details()}"
    return f"{type(e).__name__}: {e}"
