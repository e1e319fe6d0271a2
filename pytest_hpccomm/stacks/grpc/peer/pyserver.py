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

    def reflect(self, ctx: Any) -> None:
        """x-hpcc-* metadata comes back as trailing metadata; x-hpcc-compress: gzip asks for a
        compressed response."""
        echo = [(k, v) for k, v in ctx.invocation_metadata() if k.startswith(wire.META_PREFIX)]
        if (wire.COMPRESS, "gzip") in echo:
            ctx.set_compression(grpc.Compression.Gzip)
        if echo:
            ctx.set_trailing_metadata(tuple(echo))

    # -- serialized --------------------------------------------------------------------------
    def echo(self, req: Any, ctx: Any) -> Any:
        self.count(sum(len(b) for b in req.buffers))
        self.reflect(ctx)
        if self.drop_last and len(req.buffers):
            del req.buffers[-1]
        return req

    def send(self, req: Any, ctx: Any) -> Any:
        n = sum(len(b) for b in req.buffers)
        self.count(n)
        self.reflect(ctx)
        return pb.Ack(bytes=n, buffers=len(req.buffers), seq=req.seq)

    def pull(self, req: Any, ctx: Any) -> Any:
        self.count(0)
        self.reflect(ctx)
        if any(n > POOL_SIZE for n in req.want):
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "buffer too large")
        return pb.Tensors(
            buffers=[bytes(buffer_at(i, n)) for i, n in enumerate(req.want)], seq=req.seq
        )

    def stats(self, req: Any, ctx: Any) -> Any:
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

    def echo_stream(self, reqs: Iterator[Any], ctx: Any) -> Iterator[Any]:
        self.reflect(ctx)
        for req in reqs:
            yield self.echo(req, _NoMeta())

    # -- raw ---------------------------------------------------------------------------------
    def frame(self, data: bytes, ctx: Any) -> wire.Frame:
        try:
            f = wire.decode_frame(data)
        except wire.FrameError as e:
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, str(e)) from None
        self.count(sum(f.lengths) if not f.flags & wire.WANT else 0)
        return f

    def raw_echo(self, data: bytes, ctx: Any) -> bytes:
        f = self.frame(data, ctx)
        self.reflect(ctx)
        if self.drop_last and f.buffers:
            return wire.encode_frame(f.buffers[:-1], f.seq)
        return data  # non-serialized: the bytes go back untouched

    def raw_send(self, data: bytes, ctx: Any) -> bytes:
        f = self.frame(data, ctx)
        self.reflect(ctx)
        return wire.encode_ack(sum(f.lengths), len(f.lengths), f.seq)

    def raw_pull(self, data: bytes, ctx: Any) -> bytes:
        f = self.frame(data, ctx)
        self.reflect(ctx)
        if any(n > POOL_SIZE for n in f.lengths):
            raise Abort(grpc.StatusCode.INVALID_ARGUMENT, "buffer too large")
        return wire.encode_frame([buffer_at(i, n) for i, n in enumerate(f.lengths)], f.seq)

    def raw_echo_stream(self, reqs: Iterator[bytes], ctx: Any) -> Iterator[bytes]:
        self.reflect(ctx)
        for data in reqs:
            yield self.raw_echo(data, _NoMeta())


class _NoMeta:
    """Stream messages after the first carry no metadata of their own."""

    def invocation_metadata(self) -> tuple[()]:
        return ()


def _ser(msg: Any) -> bytes:
    data: bytes = msg.SerializeToString()
    return data


def handlers(svc: Service, aio: bool = False) -> list[grpc.GenericRpcHandler]:
    u, s = grpc.unary_unary_rpc_method_handler, grpc.stream_stream_rpc_method_handler
    T, Sr = pb.Tensors.FromString, pb.StatsRequest.FromString
    wrap: Callable[[Any], Any] = _async_unary if aio else _sync_unary
    delay = _async_delay(svc) if aio else svc.delay
    stream_wrap = _async_stream if aio else _sync_stream
    stream, raw_stream = stream_wrap(svc.echo_stream), stream_wrap(svc.raw_echo_stream)
    serialized = {
        "Echo": u(wrap(svc.echo), T, _ser),
        "Send": u(wrap(svc.send), T, _ser),
        "Pull": u(wrap(svc.pull), T, _ser),
        "EchoStream": s(stream, T, _ser),
        "Delay": u(delay, T, _ser),
        "GetStats": u(wrap(svc.stats), Sr, _ser),
    }
    raw = {
        "Echo": u(wrap(svc.raw_echo)),
        "Send": u(wrap(svc.raw_send)),
        "Pull": u(wrap(svc.raw_pull)),
        "EchoStream": s(raw_stream),
    }
    return [
        grpc.method_handlers_generic_handler(wire.SERVICE, serialized),
        grpc.method_handlers_generic_handler(wire.RAW_SERVICE, raw),
    ]


def _sync_unary(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def call(req: Any, ctx: Any) -> Any:
        try:
            return fn(req, ctx)
        except Abort as e:
            ctx.abort(e.code, e.details)  # raises

    return call


def _async_unary(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    async def call(req: Any, ctx: Any) -> Any:
        try:
            return fn(req, ctx)
        except Abort as e:
            await ctx.abort(e.code, e.details)  # raises

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


def _sync_stream(gen: Callable[[Iterator[Any], Any], Iterator[Any]]) -> Callable[..., Any]:
    def stream(reqs: Iterator[Any], ctx: Any) -> Iterator[Any]:
        try:
            yield from gen(reqs, ctx)
        except Abort as e:
            ctx.abort(e.code, e.details)

    return stream


def _async_stream(gen: Callable[[Iterator[Any], Any], Iterator[Any]]) -> Callable[..., Any]:
    async def stream(reqs: AsyncIterator[Any], ctx: Any) -> AsyncIterator[Any]:
        first = True
        try:
            async for req in reqs:
                for out in gen(iter([req]), ctx if first else _NoMeta()):
                    yield out
                first = False
        except Abort as e:
            await ctx.abort(e.code, e.details)

    return stream


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
