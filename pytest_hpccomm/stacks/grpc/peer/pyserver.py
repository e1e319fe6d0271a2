"""The Python tensor-transfer server: grpcio's sync server (thread pool) or grpc.aio.

Both modes are served by generic handlers: TensorTransfer with protobuf (de)serializers and
RawTensorTransfer with none (bytes in, bytes out). Peer-side module.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from concurrent import futures
from typing import Any, Callable

import grpc

from pytest_hpccomm.stacks.grpc import wire
from pytest_hpccomm.stacks.grpc.peer import messages as pb
from pytest_hpccomm.stacks.grpc.peer.payload import POOL_SIZE, buffer_at


class Abort(Exception):
    """Ends the RPC with a status: the wrappers turn it into ctx.abort (a coroutine in aio)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


_ASKABLE = {c.value[0]: c for c in grpc.StatusCode if c != grpc.StatusCode.OK}
Metadata = tuple[tuple[str, Any], ...]


def asked_status(code: str, message: bytes) -> Abort:
    """The status wire.STATUS asks for (decimal digits, 1..16, as server.cc reads them), its
    message wire.STATUS_MESSAGE's UTF-8 text."""
    digits = code.isascii() and code.isdigit() and len(code) <= 2
    asked = _ASKABLE.get(int(code)) if digits else None
    try:
        text = message.decode()
    except UnicodeDecodeError:
        asked = None
    if asked is None:
        return Abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{wire.STATUS} must be a status code 1..16 and {wire.STATUS_MESSAGE} UTF-8",
        )
    return Abort(asked, text)


class Service:
    """Request logic shared by the sync and asyncio servers."""

    def __init__(self, peer: str, drop_last: bool = False) -> None:
        self.peer = peer
        self.drop_last = drop_last  # planted bug (tests only): echoes lose their last buffer
        self.rpcs = self.bytes = self.cancelled = 0
        # which calls saw their cancellation, by seq: a test checks its own call, not a
        # server-wide count that an earlier test's late cancellations also move
        self.cancelled_seqs: deque[int] = deque(maxlen=wire.CANCELLED_SEQS)
        self._lock = threading.Lock()  # the sync server runs handlers on many threads

    def count(self, nbytes: int) -> None:
        with self._lock:
            self.rpcs += 1
            self.bytes += nbytes

    def cancelled_one(self, seq: int) -> None:
        with self._lock:
            self.cancelled += 1
            self.cancelled_seqs.append(seq)

    def reflect(self, ctx: Any) -> Metadata:
        """What a data method's request metadata asks (wire.py), before the method answers:
        x-hpcc-* comes back as trailing metadata and x-hpcc-initial-* as initial metadata
        (returned: the wrapper sends it, a coroutine in aio); x-hpcc-compress: gzip asks for
        compressed responses; x-hpcc-status ends the call with that status (Abort)."""
        md = [(k, v) for k, v in ctx.invocation_metadata() if k.startswith(wire.META_PREFIX)]
        initial = tuple((k, v) for k, v in md if k.startswith(wire.ECHO_INITIAL))
        trailing = tuple((k, v) for k, v in md if not k.startswith(wire.ECHO_INITIAL))
        if (wire.COMPRESS, "gzip") in md:
            ctx.set_compression(grpc.Compression.Gzip)  # before the initial metadata goes
        if trailing:
            ctx.set_trailing_metadata(trailing)
        asked = dict(md)
        if wire.STATUS in asked:
            raise asked_status(asked[wire.STATUS], asked.get(wire.STATUS_MESSAGE, b""))
        return initial

    # -- serialized --------------------------------------------------------------------------
    def echo(self, req: Any) -> Any:
        self.count(sum(len(b) for b in req.buffers))
        if self.drop_last and len(req.buffers):
            del req.buffers[-1]
        return req

    def send(self, req: Any) -> Any:
        n = sum(len(b) for b in req.buffers)
        self.count(n)
        return pb.Ack(bytes=n, buffers=len(req.buffers), seq=req.seq)

    def pull(self, req: Any) -> Any:
        self.count(0)
        _check_pool(req.want)
        return pb.Tensors(
            buffers=[bytes(buffer_at(i, n)) for i, n in enumerate(req.want)], seq=req.seq
        )

    def pull_stream(self, req: Any) -> Iterator[Any]:
        """Message i (seq i) is one buffer: tensor i of the pool at size want[i]."""
        self.count(0)
        _check_pool(req.want)  # before the first message: none or all
        for i, n in enumerate(req.want):
            yield pb.Tensors(buffers=[bytes(buffer_at(i, n))], seq=i)

    def sizes(self, req: Any) -> list[int]:
        """A SendStream message's buffer sizes."""
        return [len(b) for b in req.buffers]

    def stream_ack(self, messages: list[list[int]]) -> Any:
        """SendStream's answer: every message's bytes and buffers; seq: how many messages."""
        n = self.count_stream(messages)
        return pb.Ack(bytes=n, buffers=sum(map(len, messages)), seq=len(messages))

    def count_stream(self, messages: list[list[int]]) -> int:
        n = sum(map(sum, messages))
        self.count(n)  # one call, all its bytes
        return n

    def stats(self, req: Any) -> Any:
        with self._lock:
            return pb.Stats(
                rpcs=self.rpcs,
                bytes=self.bytes,
                cancelled=self.cancelled,
                peer=self.peer,
                grpc_version=grpc.__version__,
                cancelled_seqs=list(self.cancelled_seqs),
            )

    def delay(self, req: Any, ctx: Any) -> Any:
        self.count(0)
        until = time.monotonic() + req.delay_ms / 1000
        while time.monotonic() < until:
            if not ctx.is_active():  # deadline passed or the client cancelled
                self.cancelled_one(req.seq)
                return pb.Ack()
            time.sleep(0.002)
        return pb.Ack(seq=req.seq)

    # -- raw ---------------------------------------------------------------------------------
    def frame(self, data: bytes, counted: bool = True) -> wire.Frame:
        try:
            f = wire.decode_frame(data)
        except wire.FrameError as e:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
        if counted:
            self.count(sum(f.lengths) if not f.flags & wire.WANT else 0)
        return f

    def raw_echo(self, data: bytes) -> bytes:
        f = self.frame(data)
        if self.drop_last and f.buffers:
            return wire.encode_frame(f.buffers[:-1], f.seq)
        return data  # non-serialized: the bytes go back untouched

    def raw_send(self, data: bytes) -> bytes:
        f = self.frame(data)
        return wire.encode_ack(sum(f.lengths), len(f.lengths), f.seq)

    def raw_pull(self, data: bytes) -> bytes:
        f = self.frame(data)
        _check_pool(f.lengths)
        return wire.encode_frame([buffer_at(i, n) for i, n in enumerate(f.lengths)], f.seq)

    def raw_pull_stream(self, data: bytes) -> Iterator[bytes]:
        f = self.frame(data)
        _check_pool(f.lengths)
        for i, n in enumerate(f.lengths):
            yield wire.encode_frame([buffer_at(i, n)], i)

    def raw_sizes(self, data: bytes) -> list[int]:
        return [len(b) for b in self.frame(data, counted=False).buffers]

    def raw_stream_ack(self, messages: list[list[int]]) -> bytes:
        n = self.count_stream(messages)
        return wire.encode_ack(n, sum(map(len, messages)), len(messages))


def _check_pool(sizes: Any) -> None:
    if any(n > POOL_SIZE for n in sizes):
        raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "buffer too large")


def _ser(msg: Any) -> bytes:
    data: bytes = msg.SerializeToString()
    return data


Fn = Callable[[Any], Any]


def handlers(svc: Service, aio: bool = False) -> list[grpc.GenericRpcHandler]:
    """Each data method: its request metadata reflected (Service.reflect), then its logic;
    the wrappers (_Sync, _Async) give the logic each RPC shape on either server."""
    T, Sr = pb.Tensors.FromString, pb.StatsRequest.FromString
    w: _Sync = _Async(svc) if aio else _Sync(svc)
    u, ss = grpc.unary_unary_rpc_method_handler, grpc.stream_stream_rpc_method_handler
    su, us = grpc.stream_unary_rpc_method_handler, grpc.unary_stream_rpc_method_handler
    serialized = {
        "Echo": u(w.unary(svc.echo), T, _ser),
        "Send": u(w.unary(svc.send), T, _ser),
        "Pull": u(w.unary(svc.pull), T, _ser),
        "EchoStream": ss(w.bidi(svc.echo), T, _ser),
        "SendStream": su(w.fold(svc.sizes, svc.stream_ack), T, _ser),
        "PullStream": us(w.unfold(svc.pull_stream), T, _ser),
        "Delay": u(_async_delay(svc) if aio else svc.delay, T, _ser),
        "GetStats": u(w.unary(svc.stats, reflect=False), Sr, _ser),
    }
    raw = {
        "Echo": u(w.unary(svc.raw_echo)),
        "Send": u(w.unary(svc.raw_send)),
        "Pull": u(w.unary(svc.raw_pull)),
        "EchoStream": ss(w.bidi(svc.raw_echo)),
        "SendStream": su(w.fold(svc.raw_sizes, svc.raw_stream_ack)),
        "PullStream": us(w.unfold(svc.raw_pull_stream)),
    }
    assert set(raw) == set(wire.RAW_METHODS)
    return [
        grpc.method_handlers_generic_handler(wire.SERVICE, serialized),
        grpc.method_handlers_generic_handler(wire.RAW_SERVICE, raw),
    ]


class _Sync:
    """The data methods' logic as the sync server's handlers: unary (request -> response),
    bidi (each request -> its response), fold (requests -> one response: SendStream), unfold
    (request -> responses: PullStream). An Abort ends the call with its status."""

    def __init__(self, svc: Service) -> None:
        self.svc = svc

    def _open(self, ctx: Any) -> None:
        initial = self.svc.reflect(ctx)
        if initial:
            ctx.send_initial_metadata(initial)

    def unary(self, fn: Fn, reflect: bool = True) -> Callable[..., Any]:
        def call(req: Any, ctx: Any) -> Any:
            try:
                if reflect:
                    self._open(ctx)
                return fn(req)
            except Abort as e:
                ctx.abort(e.code, e.details)  # raises

        return call

    def bidi(self, fn: Fn) -> Callable[..., Any]:
        def call(reqs: Iterator[Any], ctx: Any) -> Iterator[Any]:
            try:
                self._open(ctx)
                for req in reqs:
                    yield fn(req)
            except Abort as e:
                ctx.abort(e.code, e.details)

        return call

    def fold(self, each: Fn, end: Fn) -> Callable[..., Any]:
        def call(reqs: Iterator[Any], ctx: Any) -> Any:
            try:
                self._open(ctx)
                return end([each(req) for req in reqs])
            except Abort as e:
                ctx.abort(e.code, e.details)

        return call

    def unfold(self, gen: Callable[[Any], Iterator[Any]]) -> Callable[..., Any]:
        def call(req: Any, ctx: Any) -> Iterator[Any]:
            try:
                self._open(ctx)
                yield from gen(req)
            except Abort as e:
                ctx.abort(e.code, e.details)

        return call


class _Async(_Sync):
    """The same on grpc.aio: coroutines and async generators around the same logic."""

    async def _aopen(self, ctx: Any) -> None:
        initial = self.svc.reflect(ctx)
        if initial:
            await ctx.send_initial_metadata(initial)

    def unary(self, fn: Fn, reflect: bool = True) -> Callable[..., Any]:
        async def call(req: Any, ctx: Any) -> Any:
            try:
                if reflect:
                    await self._aopen(ctx)
                return fn(req)
            except Abort as e:
                await ctx.abort(e.code, e.details)  # raises

        return call

    def bidi(self, fn: Fn) -> Callable[..., Any]:
        async def call(reqs: AsyncIterator[Any], ctx: Any) -> AsyncIterator[Any]:
            try:
                await self._aopen(ctx)
                async for req in reqs:
                    yield fn(req)
            except Abort as e:
                await ctx.abort(e.code, e.details)

        return call

    def fold(self, each: Fn, end: Fn) -> Callable[..., Any]:
        async def call(reqs: AsyncIterator[Any], ctx: Any) -> Any:
            try:
                await self._aopen(ctx)
                return end([each(req) async for req in reqs])
            except Abort as e:
                await ctx.abort(e.code, e.details)

        return call

    def unfold(self, gen: Callable[[Any], Iterator[Any]]) -> Callable[..., Any]:
        async def call(req: Any, ctx: Any) -> AsyncIterator[Any]:
            try:
                await self._aopen(ctx)
                for out in gen(req):
                    yield out
            except Abort as e:
                await ctx.abort(e.code, e.details)

        return call


def _async_delay(svc: Service) -> Callable[[Any, Any], Any]:
    async def delay(req: Any, ctx: Any) -> Any:
        svc.count(0)
        try:
            await asyncio.sleep(req.delay_ms / 1000)
        except asyncio.CancelledError:  # grpc.aio cancels the handler on deadline / cancel
            svc.cancelled_one(req.seq)
            raise
        return pb.Ack(seq=req.seq)

    return delay


def options(max_message: int) -> list[tuple[str, int]]:
    return [("grpc.max_receive_message_length", max_message), ("grpc.max_send_message_length", -1)]


def _ports(server: Any, bind: str, tls: tuple[str, bytes, bytes] | None) -> tuple[int, int]:
    port = server.add_insecure_port(bind)
    tls_port = 0
    if tls is not None:
        tls_bind, key, cert = tls
        tls_port = server.add_secure_port(tls_bind, grpc.ssl_server_credentials([(key, cert)]))
    if not port or (tls is not None and not tls_port):
        raise OSError(f"cannot listen on {bind}")
    return port, tls_port


def serve_sync(
    svc: Service,
    bind: str,
    tls: tuple[str, bytes, bytes] | None,
    max_message: int,
    lifetime: float,
    ready: Callable[[int, int], None],
) -> None:
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16),
        handlers=handlers(svc),
        options=options(max_message),
    )
    port, tls_port = _ports(server, bind, tls)
    server.start()
    ready(port, tls_port)
    server.wait_for_termination(timeout=lifetime)  # bounded even if nobody stops us
    server.stop(grace=1.0)


def serve_aio(
    svc: Service,
    bind: str,
    tls: tuple[str, bytes, bytes] | None,
    max_message: int,
    lifetime: float,
    ready: Callable[[int, int], None],
) -> None:
    async def main() -> None:
        server = grpc.aio.server(handlers=handlers(svc, aio=True), options=options(max_message))
        port, tls_port = _ports(server, bind, tls)
        await server.start()
        ready(port, tls_port)
        await server.wait_for_termination(timeout=lifetime)
        await server.stop(grace=1.0)

    asyncio.run(main())
