"""What travels between gRPC peers, without protobuf: method paths, raw frames, the lines
peers print. Standard library only, so the orchestrator (and the plugin, loaded in every
pytest session) imports it without grpcio; the protobuf messages are in peer/messages.py.
Peer-side module (no pytest, no orchestrator imports).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any, Sequence

from pytest_hpccomm.peer import framing

PACKAGE = "hpccomm.grpcbench"
SERVICE = f"{PACKAGE}.TensorTransfer"
RAW_SERVICE = f"{PACKAGE}.RawTensorTransfer"
MODES = ("serialized", "raw")

READY = "HPCCOMM-GRPC-READY"
# RawTensorTransfer's methods: TensorTransfer's data methods, frames in and out
RAW_METHODS = ("Echo", "Send", "Pull", "EchoStream", "SendStream", "PullStream")
# Request metadata the data methods act on (every server peer, both modes, every RPC shape):
META_PREFIX = "x-hpcc-"  # these keys come back as trailing metadata, but for ECHO_INITIAL's
ECHO_INITIAL = f"{META_PREFIX}initial-"  # these come back as initial metadata (only)
COMPRESS = f"{META_PREFIX}compress"  # value "gzip": the server compresses its response(s)
# the server ends the call with this status code (decimal, 1..16) and the UTF-8 message of
# STATUS_MESSAGE (a -bin key: any text, whitespace and non-ASCII included) instead of answering:
# a unary or server-streaming method once it has the request, a streaming request before it
# reads one. Any other value of STATUS is INVALID_ARGUMENT.
STATUS = f"{META_PREFIX}status"
STATUS_MESSAGE = f"{META_PREFIX}status-message-bin"
MAX_MESSAGE = 16 << 20  # a server's default receive limit (--max-message)
CANCELLED_SEQS = 64  # GetStats names the seq of this many latest cancelled Delay calls

# The C++ peer compiles these (and the result markers, the pool size) from a header that
# build.py generates from this module: see build.constants_header().


def method(name: str, mode: str = "serialized") -> str:
    """Full method path, e.g. /hpccomm.grpcbench.TensorTransfer/Echo."""
    return f"/{SERVICE if mode == 'serialized' else RAW_SERVICE}/{name}"


# -- raw frames (non-serialized mode) -------------------------------------------------------------

WANT = 1  # flags bit 0: the lengths are sizes wanted from the server, no data follows
_FIXED = struct.Struct("<IIQ")  # count, flags, seq
_ACK = struct.Struct("<QQQ")  # bytes, buffers, seq
HEADER_SIZE, ACK_SIZE = _FIXED.size, _ACK.size

Buffer = bytes | bytearray | memoryview


class FrameError(ValueError):
    pass


@dataclass(frozen=True)
class Frame:
    buffers: list[memoryview]  # views into the received bytes: no copy
    seq: int = 0
    flags: int = 0
    lengths: tuple[int, ...] = ()


def encode_frame(buffers: Sequence[Buffer], seq: int = 0) -> bytes:
    """One copy (grpcio takes bytes, not an iovec); the C++ peer sends slices without copying."""
    head = _FIXED.pack(len(buffers), 0, seq) + struct.pack(
        f"<{len(buffers)}Q", *(len(b) for b in buffers)
    )
    return b"".join([head, *buffers])


def encode_want(sizes: Sequence[int], seq: int = 0) -> bytes:
    return _FIXED.pack(len(sizes), WANT, seq) + struct.pack(f"<{len(sizes)}Q", *sizes)


def decode_frame(data: bytes) -> Frame:
    if len(data) < _FIXED.size:
        raise FrameError("frame shorter than its 16-byte header")
    count, flags, seq = _FIXED.unpack_from(data)
    head = _FIXED.size + 8 * count
    if len(data) < head:
        raise FrameError("frame shorter than its length table")
    lengths = struct.unpack_from(f"<{count}Q", data, _FIXED.size)
    if flags & WANT:
        if len(data) != head:
            raise FrameError("WANT frame carries data")
        return Frame([], seq, flags, lengths)
    if len(data) != head + sum(lengths):
        raise FrameError("frame length does not match its length table")
    view, out, at = memoryview(data), [], head
    for n in lengths:
        out.append(view[at : at + n])
        at += n
    return Frame(out, seq, flags, lengths)


def encode_ack(nbytes: int, buffers: int, seq: int) -> bytes:
    return _ACK.pack(nbytes, buffers, seq)


def decode_ack(data: bytes) -> tuple[int, int, int]:
    if len(data) != _ACK.size:
        raise FrameError(f"raw ack of {len(data)} bytes, expected {_ACK.size}")
    nbytes, buffers, seq = _ACK.unpack(data)
    return nbytes, buffers, seq


# -- peer output ----------------------------------------------------------------------------------


def ready_line(info: dict[str, Any]) -> str:
    return f"{READY} {json.dumps(info, separators=(',', ':'))}"


def parse_ready(output: str) -> dict[str, Any] | None:
    """The server's READY document, once it has printed one."""
    for line in output.splitlines():
        if line.startswith(READY + " "):
            doc: dict[str, Any] = json.loads(line[len(READY) + 1 :])
            return doc
    return None


def count_ready(output: str) -> int:
    return sum(1 for line in output.splitlines() if line.startswith(READY + " "))


def parse_result(stdout: str) -> dict[str, Any]:
    """The client's result document (the last one between the markers)."""
    return framing.parse_last(stdout)
