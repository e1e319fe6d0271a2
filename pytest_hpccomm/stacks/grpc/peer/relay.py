"""A grpcio-shaped channel whose calls the native peer makes (`hpcc_grpc_peer relay`,
native/relay.cc): the conformance suite's client inside a gRPC runtime. An RDMA gRPC build or
an rsocket preload lives in the native process; grpcio's bundled core in pytest cannot enter
it. The suite encodes and checks every message as before (TensorClient over this channel);
only the call itself crosses into the runtime.

The relay process reads its calls from a pipe and dies with it (end of file), every call has
a deadline, and a call whose answer is late by more than ANSWER_SLACK kills the relay.
"""

from __future__ import annotations

import contextlib
import os
import select
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc

UNARY, STREAM, READY = 1, 2, 3  # the record kinds of relay.cc (STREAM: any streaming shape)
DEFAULT_TIMEOUT = 300.0  # s: a call without one still ends (the relay must never hang)
ANSWER_SLACK = 30.0  # s past a call's deadline before the relay is declared hung
_CODES = {c.value[0]: c for c in grpc.StatusCode}
Metadata = Sequence[tuple[str, str | bytes]]
Received = list[tuple[str, str | bytes]]  # metadata that came back: -bin values as bytes


class RelayBroken(Exception):
    """The relay process died, hung or answered garbage: a failure of the item, not a status."""


class RelayError(grpc.RpcError):
    """A call the relay made ended with a non-OK status (what grpcio raises as RpcError)."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(f"{answer.code.name}: {answer.details}")
        self.answer = answer  # its timing, and a cancelled stream's answers so far

    def code(self) -> grpc.StatusCode:
        return self.answer.code

    def details(self) -> str:
        return self.answer.details

    def initial_metadata(self) -> Received:
        return self.answer.initial

    def trailing_metadata(self) -> Received:
        return self.answer.trailing


class Answer:
    """What came back from one call (relay.cc's answer record)."""

    def __init__(
        self,
        code: int,
        details: str,
        elapsed_us: int,
        initial: Received,
        trailing: Received,
        messages: list[bytes],
    ) -> None:
        self.code = _CODES.get(code, grpc.StatusCode.UNKNOWN)
        self.details, self.elapsed = details, elapsed_us / 1e6
        self.initial, self.trailing, self.messages = initial, trailing, messages

    # grpcio's Call surface the suite uses
    def initial_metadata(self) -> Received:
        return self.initial

    def trailing_metadata(self) -> Received:
        return self.trailing


def _str(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def encode_call(
    kind: int,
    method: str,
    messages: Sequence[bytes],
    timeout: float,
    cancel_after: float = 0.0,
    gzip: bool = False,
    metadata: Metadata = (),
) -> bytes:
    """relay.cc's call record: a unary call (one message) or a stream: the relay writes every
    message, closes its side, reads every answer, which carries a call of any streaming shape
    (client, server or bidi streaming: gRPC's wire does not tell them apart)."""
    parts = [
        struct.pack("<I", kind),
        _str(method.encode()),
        struct.pack(
            "<QQII", round(timeout * 1e6), round(cancel_after * 1e6), int(gzip), len(metadata)
        ),
    ]
    for key, value in metadata:
        parts += [_str(key.encode()), _str(value if isinstance(value, bytes) else value.encode())]
    parts.append(struct.pack("<I", len(messages)))
    parts += [_str(bytes(m)) for m in messages]
    return b"".join(parts)


class _Reader:
    """Reads an answer record from the relay's stdout, never past a deadline."""

    def __init__(self, fd: int, deadline: float) -> None:
        self.fd, self.deadline = fd, deadline

    def take(self, n: int) -> bytes:
        chunks, need = [], n
        while need:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise RelayBroken("no answer in time")
            chunk = os.read(self.fd, min(need, 1 << 20))
            if not chunk:
                raise RelayBroken("the relay closed its output")
            chunks.append(chunk)
            need -= len(chunk)
        return b"".join(chunks)

    def u32(self) -> int:
        v: int = struct.unpack("<I", self.take(4))[0]
        return v

    def u64(self) -> int:
        v: int = struct.unpack("<Q", self.take(8))[0]
        return v

    def str(self) -> bytes:
        return self.take(self.u64())

    def metadata(self) -> Received:
        out: Received = []
        for _ in range(self.u32()):
            key = self.str().decode()
            value = self.str()
            out.append((key, value if key.endswith("-bin") else value.decode()))
        return out

    def answer(self) -> Answer:
        code = struct.unpack("<i", self.take(4))[0]
        details = self.str().decode(errors="replace")
        elapsed = self.u64()
        initial, trailing = self.metadata(), self.metadata()
        messages = [self.str() for _ in range(self.u32())]
        return Answer(code, details, elapsed, initial, trailing, messages)


class RelayChannel:
    """One native relay process, one gRPC channel in it to `target`. Calls are serialized
    (one at a time); grpcio's multi-callable API on top (unary_unary, stream_stream)."""

    def __init__(
        self,
        peer: Path,
        target: str,
        env: Mapping[str, str] | None = None,
        *,
        ca: Path | None = None,
        gzip: bool = False,
    ) -> None:
        argv = [str(peer), "relay", "--target", target]
        if ca is not None:
            argv += ["--ca", str(ca)]
        if gzip:
            argv += ["--gzip"]
        self.target = target
        self._err = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )

    def call(
        self, kind: int, method: str, messages: Sequence[bytes], timeout: float | None, **kw: Any
    ) -> Answer:
        timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        return self._exchange(encode_call(kind, method, messages, timeout, **kw), timeout)

    def ready(self, timeout: float) -> bool:
        record = struct.pack("<IQ", READY, round(timeout * 1e6))
        return self._exchange(record, timeout).code == grpc.StatusCode.OK

    def _exchange(self, record: bytes, timeout: float) -> Answer:
        """One record out, its answer back within the call's timeout plus ANSWER_SLACK."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(record)
            self._proc.stdin.flush()
            return _Reader(
                self._proc.stdout.fileno(), time.monotonic() + timeout + ANSWER_SLACK
            ).answer()
        except (OSError, RelayBroken) as e:
            raise RelayBroken(f"native relay to {self.target}: {e}; {self.last_words()}") from None

    def last_words(self) -> str:
        """The relay's state and the end of its stderr, for a broken relay's message."""
        state = self._proc.poll()
        self._err.seek(0)
        tail = self._err.read().decode(errors="replace").strip()[-600:]
        return f"relay {'running' if state is None else f'exited {state}'}" + (
            f", stderr: {tail}" if tail else ""
        )

    def unary_unary(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
    ) -> _Unary:
        return _Unary(self, method, request_serializer, response_deserializer)

    def stream_stream(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
    ) -> _Stream:
        return _Stream(self, method, request_serializer, response_deserializer)

    def stream_unary(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
    ) -> _StreamUnary:
        return _StreamUnary(self, method, request_serializer, response_deserializer)

    def unary_stream(
        self,
        method: str,
        request_serializer: Callable[[Any], bytes] | None = None,
        response_deserializer: Callable[[bytes], Any] | None = None,
    ) -> _UnaryStream:
        return _UnaryStream(self, method, request_serializer, response_deserializer)

    def close(self) -> None:
        """End of file ends the relay; one that does not leave is killed (its own session)."""
        with contextlib.suppress(OSError):
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=5)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._err.close()

    def __del__(self) -> None:  # a forgotten relay must not outlive its owner
        if getattr(self, "_proc", None) is not None and self._proc.poll() is None:
            self._proc.kill()


class _Callable:
    def __init__(
        self,
        ch: RelayChannel,
        method: str,
        ser: Callable[[Any], bytes] | None,
        de: Callable[[bytes], Any] | None,
    ) -> None:
        self._ch, self._method = ch, method
        self._ser = ser or bytes
        self._de = de or (lambda b: b)

    def _call(
        self,
        kind: int,
        requests: Iterable[Any],
        timeout: float | None,
        metadata: Metadata | None,
        compression: Any,
        cancel_after: float,
    ) -> Answer:
        return self._ch.call(
            kind,
            self._method,
            [self._ser(r) for r in requests],
            timeout,
            metadata=metadata or (),
            cancel_after=cancel_after,
            gzip=compression == grpc.Compression.Gzip,
        )


class _Unary(_Callable):
    def with_call(
        self,
        request: Any,
        timeout: float | None = None,
        metadata: Metadata | None = None,
        compression: Any = None,
        cancel_after: float = 0.0,
    ) -> tuple[Any, Answer]:
        """As grpcio's; cancel_after (s, 0: never): the relay cancels the call that long after
        it started, and the answer says how it ended."""
        a = self._call(UNARY, [request], timeout, metadata, compression, cancel_after)
        if a.code != grpc.StatusCode.OK:
            raise RelayError(a)
        return self._de(a.messages[0]), a

    def __call__(self, request: Any, **kw: Any) -> Any:
        return self.with_call(request, **kw)[0]


class _Streaming(_Callable):
    def _stream(
        self,
        requests: Iterable[Any],
        timeout: float | None = None,
        metadata: Metadata | None = None,
        compression: Any = None,
        cancel_after: float = 0.0,
    ) -> tuple[list[Any], Answer]:
        """Every request goes out, then the answers come back as a list (grpcio streams them:
        the suite's properties read them all), with the call's answer (its metadata).
        cancel_after (s): after the first answer, the request side left open, the relay
        cancels the stream; a RelayError says how it ended, its answers so far in
        `.messages`."""
        a = self._call(STREAM, requests, timeout, metadata, compression, cancel_after)
        if a.code != grpc.StatusCode.OK:
            raise RelayError(a)
        return [self._de(m) for m in a.messages], a


class _Stream(_Streaming):
    """Bidi streaming: the requests, the answers as a list."""

    def with_call(self, requests: Iterable[Any], **kw: Any) -> tuple[list[Any], Answer]:
        return self._stream(requests, **kw)

    def __call__(self, requests: Iterable[Any], **kw: Any) -> list[Any]:
        return self._stream(requests, **kw)[0]


class _UnaryStream(_Streaming):
    """Server streaming: one request, the answers as a list."""

    def with_call(self, request: Any, **kw: Any) -> tuple[list[Any], Answer]:
        return self._stream([request], **kw)

    def __call__(self, request: Any, **kw: Any) -> list[Any]:
        return self._stream([request], **kw)[0]


class _StreamUnary(_Streaming):
    """Client streaming: the requests, one answer. A stream that ends OK with another number
    of answers is INTERNAL, as grpcio has it."""

    def with_call(self, requests: Iterable[Any], **kw: Any) -> tuple[Any, Answer]:
        answers, a = self._stream(requests, **kw)
        if len(answers) != 1:
            a.code = grpc.StatusCode.INTERNAL
            a.details = f"{len(answers)} responses to a client-streaming call, not one"
            raise RelayError(a)
        return answers[0], a

    def __call__(self, requests: Iterable[Any], **kw: Any) -> Any:
        return self.with_call(requests, **kw)[0]
