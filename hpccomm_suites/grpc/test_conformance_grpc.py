"""gRPC conformance: properties of the tensor-transfer service, checked with Hypothesis against
one long-lived local server per peer kind (Python sync, Python asyncio, native C++), in both
payload modes. The calls are made by grpcio in this process (client kind python) or by the
native peer's relay (native): the one that runs inside a gRPC runtime (--hpc-grpc-preset), the
properties still encoded and checked here.

Each property builds its @given function inside the test under `grpc_settings()`, so its
example budget follows the profile (--hpc-grpc-examples) and it runs once per (peer, mode)
item. Servers, clients and certificates are the gRPC plugin's fixtures (stacks/grpc/plugin.py).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_hpccomm.cluster.placement import LOOPBACK
from pytest_hpccomm.coverage import cells
from pytest_hpccomm.stacks.grpc import wire
from pytest_hpccomm.stacks.grpc.conformance import CountingProxy, SettingsFactory, eventually
from pytest_hpccomm.stacks.grpc.coverage import PEERS
from pytest_hpccomm.stacks.grpc.driver import ServerHandle, hostport
from pytest_hpccomm.stacks.grpc.fixtures import Connect
from pytest_hpccomm.stacks.grpc.options import GrpcOptions
from pytest_hpccomm.stacks.grpc.peer.payload import POOL_SIZE, buffers_for
from pytest_hpccomm.stacks.grpc.properties import (
    MiB,
    Pattern,
    layouts,
    materialize,
    metadata,
    total,
)

# without grpcio the module cannot import: skip it with the stack's own reason, never error
grpc = pytest.importorskip(
    "grpc",
    reason="stack 'grpc' not available: missing grpc (install: pip install 'pytest-hpccomm[grpc]')",
)
from pytest_hpccomm.stacks.grpc.peer.pyclient import TensorClient, request  # noqa: E402

# stock gRPC skips off TCP fabrics (grpc_server); an RDMA runtime runs on its device's
pytestmark = [pytest.mark.conformance, pytest.mark.stack("grpc")]

Codes = grpc.StatusCode


def check_round_trip(client: TensorClient, layout: list[Any]) -> None:
    sent = materialize(layout)
    got = client.echo(sent, timeout=60)
    assert len(got) == len(sent), f"{len(sent)} buffers sent, {len(got)} came back"
    for i, (a, b) in enumerate(zip(sent, got)):
        assert a == b, f"buffer {i} of {len(a)} bytes came back as {len(b)} different bytes"


@pytest.mark.covers("grpc", *cells(["large_unary"], PEERS))
def test_round_trip_is_byte_exact(
    grpc_client: TensorClient, grpc_options: GrpcOptions, grpc_settings: SettingsFactory
) -> None:
    """Echo returns every buffer, in order, byte for byte: arbitrary layouts of 0 B to 6 MiB
    buffers, totals up to half the server's limit (> 4 MiB, gRPC's default limit)."""

    @grpc_settings()
    @given(layout=layouts(budget=grpc_options.max_message // 2))
    def round_trip(layout: list[Any]) -> None:
        check_round_trip(grpc_client, layout)

    round_trip()


# Edge layouts every run covers, outside the property: a failing explicit example would stop
# Hypothesis before it generates and shrinks (the planted-bug test needs the shrunk example).
EDGES: dict[str, list[Any]] = {
    "empty": [],
    "one-empty-buffer": [b""],
    "5MiB-buffer": [Pattern(5 * MiB, seed=1)],
    "5x1MiB": [Pattern(MiB, seed=s) for s in range(5)],
    "1000-buffers": [bytes([i % 256]) for i in range(1000)],
}


@pytest.mark.covers("grpc", *cells(["empty_unary", "large_unary"], PEERS))
@pytest.mark.parametrize("edge", sorted(EDGES))
def test_round_trip_edges(grpc_client: TensorClient, edge: str) -> None:
    check_round_trip(grpc_client, EDGES[edge])


@pytest.mark.covers("grpc", *cells(["ping_pong"], PEERS))
def test_stream_keeps_order(grpc_client: TensorClient, grpc_settings: SettingsFactory) -> None:
    """EchoStream answers message i with message i (seq and buffers), in order."""

    @grpc_settings()
    @given(
        messages=st.lists(
            layouts(max_buffers=8, max_buffer=64 << 10, budget=256 << 10), min_size=1, max_size=20
        )
    )
    def stream(messages: list[list[Any]]) -> None:
        sent = [materialize(m) for m in messages]
        got = grpc_client.stream(sent, timeout=60)
        assert [seq for seq, _ in got] == list(range(len(sent)))
        assert [bufs for _, bufs in got] == sent

    stream()


# interop's client_streaming and server_streaming sizes: every run checks them as well
INTEROP_REQUESTS = [27182, 8, 1828, 45904]  # aggregate 74922
INTEROP_RESPONSES = [31415, 9, 2653, 58979]


def stream_messages(max_size: int = 20) -> st.SearchStrategy[list[list[Any]]]:
    """The messages of a stream: 0 to max_size layouts of up to 256 KiB each."""
    return st.lists(
        layouts(max_buffers=8, max_buffer=64 << 10, budget=256 << 10), max_size=max_size
    )


def summed(messages: list[list[Any]]) -> tuple[int, int, int]:
    """SendStream's answer to these messages: (bytes, buffers, messages)."""
    return sum(map(total, messages)), sum(map(len, messages)), len(messages)


def pulled(sizes: list[int]) -> list[tuple[int, list[bytes]]]:
    """PullStream's answers to these sizes: message i is (seq i, [tensor i at size i])."""
    return [(i, [b]) for i, b in enumerate(buffers_for(sizes))]


@pytest.mark.covers("grpc", *cells(["client_streaming"], PEERS))
def test_client_stream_is_answered_with_its_sum(
    grpc_client: TensorClient, grpc_settings: SettingsFactory
) -> None:
    """SendStream (client streaming) answers 0 to 20 messages with one Ack of their total
    bytes, total buffers and how many there were (interop's client_streaming: 27182, 8, 1828
    and 45904 bytes, 74922 in all)."""

    @grpc_settings()
    @given(messages=stream_messages())
    def answered(messages: list[list[Any]]) -> None:
        got = grpc_client.send_stream([materialize(m) for m in messages], timeout=60)
        assert got == summed(messages), (
            f"{len(messages)} messages answered (bytes, buffers, messages) = {got}"
        )

    answered()
    interop = [[Pattern(n, seed=i).materialize()] for i, n in enumerate(INTEROP_REQUESTS)]
    assert grpc_client.send_stream(interop, timeout=60) == (74922, 4, 4)


@pytest.mark.covers("grpc", *cells(["server_streaming"], PEERS))
def test_server_stream_sends_each_wanted_tensor(
    grpc_client: TensorClient, grpc_settings: SettingsFactory
) -> None:
    """PullStream (server streaming) answers one request of 0 to 20 wanted sizes with one
    message per size, in order: message i is seq i and tensor i of the pool at size i, byte
    for byte (interop's server_streaming: 31415, 9, 2653 and 58979 bytes); a size beyond the
    pool is INVALID_ARGUMENT."""

    @grpc_settings()
    @given(sizes=st.lists(st.one_of(st.integers(0, 64), st.integers(0, 256 << 10)), max_size=20))
    def streamed(sizes: list[int]) -> None:
        got = grpc_client.pull_stream(sizes, timeout=60)
        assert [seq for seq, _ in got] == list(range(len(sizes))), "answers out of order"
        assert got == pulled(sizes), "PullStream sent other bytes than tensor i of the pool"

    streamed()
    assert grpc_client.pull_stream(INTEROP_RESPONSES, timeout=60) == pulled(INTEROP_RESPONSES)
    with pytest.raises(grpc.RpcError) as err:
        grpc_client.pull_stream([8, POOL_SIZE + 1], timeout=60)
    assert err.value.code() == Codes.INVALID_ARGUMENT


@pytest.mark.covers("grpc", *cells(["large_unary"], PEERS))
def test_send_counts_every_byte(grpc_client: TensorClient, grpc_settings: SettingsFactory) -> None:
    @grpc_settings()
    @given(layout=layouts(max_buffer=MiB, budget=4 * MiB))
    def send(layout: list[Any]) -> None:
        assert grpc_client.send(materialize(layout), timeout=60) == total(layout)

    send()


@pytest.mark.covers("grpc", *cells(["large_unary", "status_code_and_message"], PEERS))
def test_pull_serves_the_wanted_tensors(
    grpc_client: TensorClient, grpc_settings: SettingsFactory
) -> None:
    """Pull (the RecvTensor path the benchmarks time) answers a list of wanted sizes with
    tensor i of the shared pool at each size: exact bytes, sizes and order; a size beyond the
    pool is INVALID_ARGUMENT."""

    @grpc_settings()
    @given(
        sizes=st.lists(st.one_of(st.integers(0, 64), st.integers(0, MiB)), max_size=12).filter(
            lambda sz: sum(sz) <= 3 * MiB
        )
    )
    def pull(sizes: list[int]) -> None:
        got = grpc_client.pull(sizes, timeout=60)
        assert [len(b) for b in got] == sizes, "Pull returned tensors of other sizes"
        assert got == buffers_for(sizes), "Pull returned other bytes than tensor i of the pool"

    pull()
    for sizes in ([0, 1, 4099], [MiB, 7, MiB + 1]):  # distinct sizes after an equal prefix
        assert grpc_client.pull(sizes, timeout=60) == buffers_for(sizes)
    with pytest.raises(grpc.RpcError) as err:
        grpc_client.pull([8, POOL_SIZE + 1], timeout=60)
    assert err.value.code() == Codes.INVALID_ARGUMENT


@pytest.mark.covers("grpc")  # the suite's own bookkeeping or path, no interop case
def test_stats_count_each_call(grpc_client: TensorClient, grpc_settings: SettingsFactory) -> None:
    """GetStats counts every call of either service and the payload bytes it received, per
    call: one Echo/Send/SendStream of n bytes is exactly one more RPC and n more bytes, one
    Pull/PullStream one more RPC (GetStats itself counts nothing). The server is this test's
    alone while it runs."""

    @grpc_settings(12)
    @given(
        layout=layouts(max_buffers=8, max_buffer=MiB, budget=2 * MiB),
        rpc=st.sampled_from(["echo", "send", "pull", "send_stream", "pull_stream"]),
    )
    def counted(layout: list[Any], rpc: str) -> None:
        before = grpc_client.stats(timeout=10)
        sent = materialize(layout)
        if rpc.startswith("pull"):
            getattr(grpc_client, rpc)([len(b) for b in sent], timeout=60)
        elif rpc == "send_stream":
            grpc_client.send_stream([[b] for b in sent], timeout=60)  # a message per buffer
        else:
            getattr(grpc_client, rpc)(sent, timeout=60)
        after = grpc_client.stats(timeout=10)
        moved = (after["rpcs"] - before["rpcs"], after["bytes"] - before["bytes"])
        assert moved == (1, 0 if rpc.startswith("pull") else total(layout)), (
            f"one {rpc} of {total(layout)} bytes moved (rpcs, bytes) by {moved}"
        )

    counted()


@pytest.mark.covers("grpc", *cells(["status_code_and_message"], PEERS))
def test_malformed_frames_are_invalid_argument(
    grpc_server: ServerHandle, grpc_connect: Connect, grpc_settings: SettingsFactory
) -> None:
    """The raw service refuses a frame whose length table does not match its body (cut short,
    or with bytes left over) with INVALID_ARGUMENT, on every method that takes a frame."""
    with grpc_connect(grpc_server.target, "raw") as c:
        c.wait_ready(10)

        @grpc_settings(20)
        @given(
            sizes=st.lists(st.integers(0, 300), min_size=1, max_size=6),
            cut=st.integers(1, 10**6),
            extra=st.binary(min_size=1, max_size=8),
            how=st.sampled_from(["short", "long"]),
            rpc=st.sampled_from(["Echo", "Send"]),
        )
        def refused(sizes: list[int], cut: int, extra: bytes, how: str, rpc: str) -> None:
            frame = wire.encode_frame(buffers_for(sizes), seq=3)
            bad = frame[: len(frame) - 1 - cut % len(frame)] if how == "short" else frame + extra
            with pytest.raises(grpc.RpcError) as err:
                c.m[rpc](bad, timeout=30)
            assert err.value.code() == Codes.INVALID_ARGUMENT, (
                f"{rpc} of a frame {how} by {len(frame) - len(bad)} bytes: {err.value.code()}"
            )

        refused()


def rpc_shapes(c: TensorClient) -> dict[str, Callable[[list[tuple[str, Any]]], Any]]:
    """One call of each RPC shape with this request metadata; each returns its call (its
    initial and trailing metadata)."""
    return {
        "unary": lambda md: c.echo_call([b"m"], metadata=md, timeout=30)[1],
        "bidi": lambda md: c.stream_call([[b"m"], [b"n"]], metadata=md, timeout=30)[1],
        "client-streaming": lambda md: c.send_stream_call([[b"m"], []], metadata=md, timeout=30)[1],
        "server-streaming": lambda md: c.pull_stream_call([1, 2], metadata=md, timeout=30)[1],
    }


SPECIAL_MESSAGE = "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \U0001f608\t\n"
NOT_OK = [c for c in Codes if c != Codes.OK]


def asking(code: Any, message: str) -> list[tuple[str, Any]]:
    """Request metadata that asks the server to end the call with this status (wire.STATUS)."""
    return [(wire.STATUS, str(code.value[0])), (wire.STATUS_MESSAGE, message.encode())]


@pytest.mark.covers("grpc", *cells(["status_code_and_message", "special_status_message"], PEERS))
def test_status_code_and_message_arrive_intact(
    grpc_client: TensorClient, grpc_settings: SettingsFactory
) -> None:
    """A status the server ends a call with (the one x-hpcc-status and its -bin message ask
    for) reaches the client exactly, on every RPC shape: any code but OK, any text, whitespace
    and non-ASCII included (interop's special status message on each shape); what no status
    can be (code 0 or 17, a message not UTF-8) is INVALID_ARGUMENT on every peer."""
    shapes = rpc_shapes(grpc_client)

    def ended(shape: str, code: Any, message: str) -> None:
        with pytest.raises(grpc.RpcError) as err:
            shapes[shape](asking(code, message))
        got = (err.value.code(), err.value.details())
        assert got == (code, message), f"{shape} call asked to end {code.name} {message!r}: {got}"

    # up to 200 characters (under 4 KiB of trailers): the message, percent-encoded (12 bytes
    # for a 4-byte character), and its -bin echo share the trailers, whose size gRPC limits
    # (2000 two-byte characters exceed it on every peer: RESOURCE_EXHAUSTED)
    @grpc_settings()
    @given(
        shape=st.sampled_from(sorted(shapes)),
        code=st.sampled_from(NOT_OK),
        message=st.text(max_size=200),
    )
    def arrives(shape: str, code: Any, message: str) -> None:
        ended(shape, code, message)

    arrives()
    for shape in sorted(shapes):
        ended(shape, Codes.UNKNOWN, SPECIAL_MESSAGE)
    for code, message in (("0", b""), ("17", b""), ("+2", b""), ("2", b"\xff")):
        with pytest.raises(grpc.RpcError) as err:  # what no status can be: refused alike
            asked = [(wire.STATUS, code), (wire.STATUS_MESSAGE, message)]
            grpc_client.echo([b"m"], metadata=asked, timeout=30)
        assert err.value.code() == Codes.INVALID_ARGUMENT, f"x-hpcc-status {code!r}, {message!r}"


def noticed(c: TensorClient, seq: int) -> bool:
    """Whether the server saw the cancellation of *this* Delay call (by its seq) within
    NOTICE_BOUND s: a per-call check, which another test's late cancellations cannot satisfy."""
    return eventually(lambda: seq in c.stats(timeout=10)["cancelled_seqs"], NOTICE_BOUND)


NOTICE_BOUND = 2.0  # s; the servers look every 2 ms, the rest is scheduling on 2 loaded cores


@pytest.mark.covers("grpc", *cells(["timeout_on_sleeping_server"], PEERS))
def test_deadline_exceeded_within_bound(
    grpc_server: ServerHandle, grpc_connect: Connect, grpc_settings: SettingsFactory
) -> None:
    """A call whose server is slower than its deadline fails with DEADLINE_EXCEEDED no sooner
    than the deadline and not much later; the server notices that very call within a bound.
    Deadlines start at 20 ms, or 20 round trips of this connection when that is longer: a call
    whose deadline passes before its request arrives never reaches the handler, which then has
    nothing to notice (an emulated RDMA runtime's first calls took longer than 20 ms)."""
    slack = 0.5  # scheduling on a loaded 2-core machine
    seqs = iter(range(1 << 40, 1 << 41))  # this test's own call ids

    with grpc_connect(grpc_server.target) as c:
        c.wait_ready(10)
        trips = []
        for _ in range(5):  # also pays the connection's first-call costs
            t0 = time.monotonic()
            c.echo([b"x"], timeout=30)
            trips.append(time.monotonic() - t0)
        floor = max(20, round(20 * 1000 * sorted(trips)[2]))

        @grpc_settings(8)
        @given(deadline_ms=st.integers(floor, floor + 280))
        def deadline(deadline_ms: int) -> None:
            seq = next(seqs)
            t0 = time.monotonic()
            with pytest.raises(grpc.RpcError) as err:
                c.delay(deadline_ms * 10 + 500, seq, timeout=deadline_ms / 1000)
            elapsed = time.monotonic() - t0
            assert err.value.code() == Codes.DEADLINE_EXCEEDED
            assert deadline_ms / 1000 - 0.005 <= elapsed <= deadline_ms / 1000 + slack
            assert noticed(c, seq), (
                f"the server did not notice call {seq}'s deadline within {NOTICE_BOUND} s"
            )

        deadline()


@pytest.mark.covers("grpc", *cells(["cancel_after_begin", "cancel_after_first_response"], PEERS))
def test_cancellation(grpc_server: ServerHandle, grpc_connect: Connect) -> None:
    """A cancelled unary call and a cancelled stream end CANCELLED; the server notices that
    very call within a bound."""
    with grpc_connect(grpc_server.target) as c:
        c.wait_ready(10)
        seq = (1 << 41) + 1
        assert c.cancelled_delay(10_000, seq, after=0.1, timeout=30) == Codes.CANCELLED
        assert noticed(c, seq), (
            f"the server did not notice the cancellation within {NOTICE_BOUND} s"
        )
        read, code = c.cancelled_stream(3, timeout=30)
        assert code == Codes.CANCELLED and read >= 1, (
            f"a stream cancelled after its first answer ended {code.name} after {read} answers"
        )


def encoded_size(nbytes: int, mode: str) -> int:
    """Bytes on the wire (before gRPC's 5-byte frame) of an echo request of one buffer."""
    msg = request([b"\0" * nbytes], mode)
    return len(msg) if isinstance(msg, (bytes, bytearray)) else len(msg.SerializeToString())


def buffer_for_message_of(limit: int, mode: str) -> int:
    """The buffer size whose request is exactly `limit` bytes (the encoding's overhead is
    constant across sizes of the same varint length, so one correction step suffices)."""
    n = limit - (encoded_size(limit, mode) - limit)
    assert encoded_size(n, mode) == limit, "no buffer size gives a request of exactly the limit"
    return n


@pytest.mark.covers("grpc", *cells(["max_message_size"], PEERS))
def test_message_limit_holds_at_the_boundary(
    grpc_client: TensorClient, grpc_mode: str, grpc_server: ServerHandle
) -> None:
    """A request of exactly the server's receive limit is served, byte for byte; one byte more
    is RESOURCE_EXHAUSTED (a server enforcing a smaller limit fails the first half, one
    enforcing none the second)."""
    at = buffer_for_message_of(grpc_server.max_message, grpc_mode)
    sent = [bytes(range(256)) * (at // 256) + b"\x5a" * (at % 256)]
    assert grpc_client.echo(sent, timeout=60) == sent, "a request of exactly the limit failed"
    with pytest.raises(grpc.RpcError) as err:
        grpc_client.echo([b"\0" * (at + 1)], timeout=60)
    assert err.value.code() == Codes.RESOURCE_EXHAUSTED


@pytest.mark.covers("grpc", *cells(["custom_metadata_trailing"], PEERS))
def test_metadata_round_trip(grpc_client: TensorClient, grpc_settings: SettingsFactory) -> None:
    """x-hpcc-* request metadata (text and -bin) comes back as trailing metadata, exactly."""

    @grpc_settings()
    @given(md=metadata())
    def round_trip(md: list[tuple[str, Any]]) -> None:
        _, call = grpc_client.echo_call([b"m"], metadata=md, timeout=30)
        back = sorted((k, v) for k, v in call.trailing_metadata() if k.startswith("x-hpcc-"))
        assert back == sorted(md)

    round_trip()


def ours(md: Any) -> list[tuple[str, Any]]:
    """The x-hpcc-* pairs of metadata that came back, sorted."""
    return sorted((k, v) for k, v in md if k.startswith(wire.META_PREFIX))


@pytest.mark.covers("grpc", *cells(["custom_metadata_initial", "custom_metadata_trailing"], PEERS))
def test_initial_metadata_round_trip(
    grpc_client: TensorClient, grpc_settings: SettingsFactory
) -> None:
    """x-hpcc-initial-* request metadata (text and -bin) comes back as the response's initial
    metadata, the other x-hpcc-* keys as its trailing metadata: exactly, each in its place
    only, on every RPC shape (unary, bidi, client and server streaming)."""
    shapes = rpc_shapes(grpc_client)

    @grpc_settings()
    @given(
        shape=st.sampled_from(sorted(shapes)),
        initial=metadata(wire.ECHO_INITIAL),
        trailing=metadata(),
    )
    def round_trip(shape: str, initial: list[Any], trailing: list[Any]) -> None:
        call = shapes[shape](initial + trailing)
        assert ours(call.initial_metadata()) == sorted(initial), f"{shape}: initial metadata"
        assert ours(call.trailing_metadata()) == sorted(trailing), f"{shape}: trailing metadata"

    round_trip()


@pytest.mark.covers("grpc", *cells(["client_compressed_unary", "server_compressed_unary"], PEERS))
def test_compression_gives_the_same_bytes(
    grpc_server: ServerHandle, grpc_mode: str, grpc_connect: Connect, grpc_settings: SettingsFactory
) -> None:
    """gzip both ways (the client's channel and the server's response) changes no byte."""
    with (
        grpc_connect(grpc_server.target, grpc_mode, gzip=True) as gz,
        grpc_connect(grpc_server.target, grpc_mode) as plain,
    ):

        @grpc_settings(15)
        @given(layout=layouts(max_buffers=16, max_buffer=MiB, budget=2 * MiB))
        def same(layout: list[Any]) -> None:
            sent = materialize(layout)
            zipped = gz.echo(sent, metadata=[("x-hpcc-compress", "gzip")], timeout=60)
            assert zipped == plain.echo(sent, timeout=60) == sent

        same()


@pytest.mark.covers("grpc", *cells(["client_compressed_unary", "server_compressed_unary"], PEERS))
@pytest.mark.grpc_runtime(
    "tcp",
    why="the bytes are counted by a kernel-TCP relay on loopback; gRPC runtime {runtime} "
    "carries its calls over the RDMA device",
)
def test_compression_takes_effect_on_the_wire(
    grpc_server: ServerHandle, grpc_mode: str, grpc_connect: Connect, grpc_lab: Any
) -> None:
    """Compression requested is compression applied: 4 MiB of zeros cross the wire in far
    fewer bytes when the channel compresses (request) and x-hpcc-compress asks for a gzip
    response; the same call uncompressed carries them all. Counted by a relay in between."""
    sent = [bytes(2 * MiB), bytes(2 * MiB)]
    with CountingProxy(grpc_server.target) as relay:
        with grpc_connect(relay.target, grpc_mode) as plain:
            plain.wait_ready(10)
            base = relay.counts()
            assert plain.echo(sent, timeout=60) == sent
            up, down = (a - b for a, b in zip(relay.counts(), base))
            assert up >= 4 * MiB and down >= 4 * MiB, (
                f"uncompressed echo of 4 MiB moved {up} bytes up, {down} down"
            )
        with grpc_connect(relay.target, grpc_mode, gzip=True) as gz:
            gz.wait_ready(10)
            base = relay.counts()
            assert gz.echo(sent, metadata=[("x-hpcc-compress", "gzip")], timeout=60) == sent
            up, down = (a - b for a, b in zip(relay.counts(), base))
        assert up < MiB // 4, f"the compressed request still took {up} bytes on the wire"
        if down >= MiB // 4 and grpc_server.kind == "python-aio":
            # A defect of grpcio's asyncio server, reproduced without this project: a handler's
            # context.set_compression(Gzip) leaves the response uncompressed (1 MiB of zeros:
            # 1048846 bytes on the wire; the same server with compression=Gzip: 1313 bytes).
            # Known, so an expected failure, and only where it is observed in this run.
            pytest.xfail(
                f"grpcio {grpc_server.info.get('grpc_version', '?')} asyncio server ignores "
                "a handler's "
                f"set_compression(): response of 4 MiB zeros took {down} bytes"
            )
        assert down < MiB // 4, (
            f"the response took {down} bytes on the wire: the server ignored x-hpcc-compress: gzip"
        )


GZIP = [(wire.COMPRESS, "gzip")]  # asks the server to compress its responses


@pytest.mark.covers(
    "grpc", *cells(["client_compressed_streaming", "server_compressed_streaming"], PEERS)
)
def test_compressed_streams_give_the_same_answers(
    grpc_server: ServerHandle, grpc_mode: str, grpc_connect: Connect, grpc_settings: SettingsFactory
) -> None:
    """gzip on streamed messages (the client's channel: every request; x-hpcc-compress: every
    response) changes no answer of SendStream, PullStream and EchoStream, byte for byte."""
    with grpc_connect(grpc_server.target, grpc_mode, gzip=True) as gz:

        @grpc_settings(15)
        @given(
            messages=stream_messages(max_size=8),
            sizes=st.lists(st.integers(0, 256 << 10), max_size=8),
        )
        def same(messages: list[list[Any]], sizes: list[int]) -> None:
            sent = [materialize(m) for m in messages]
            assert gz.send_stream(sent, metadata=GZIP, timeout=60) == summed(messages)
            assert gz.pull_stream(sizes, metadata=GZIP, timeout=60) == pulled(sizes)
            assert gz.stream(sent, metadata=GZIP, timeout=60) == list(enumerate(sent))

        same()


@pytest.mark.covers(
    "grpc", *cells(["client_compressed_streaming", "server_compressed_streaming"], PEERS)
)
@pytest.mark.grpc_runtime(
    "tcp",
    why="the bytes are counted by a kernel-TCP relay on loopback; gRPC runtime {runtime} "
    "carries its calls over the RDMA device",
)
def test_stream_compression_takes_effect_on_the_wire(
    grpc_server: ServerHandle, grpc_mode: str, grpc_connect: Connect
) -> None:
    """Compression requested on a stream is compression applied to its messages: eight
    512 KiB requests of zeros (SendStream) and eight 512 KiB tensors of the pool (PullStream)
    cross the wire in far fewer bytes when the channel compresses and x-hpcc-compress asks
    for gzip responses; the same calls uncompressed carry them all. Counted by a relay in
    between."""
    sent, sizes = [[bytes(MiB // 2)] for _ in range(8)], [MiB // 2] * 8
    moved = {}
    with CountingProxy(grpc_server.target) as relay:
        for gzip in (False, True):
            with grpc_connect(relay.target, grpc_mode, gzip=gzip) as c:
                c.wait_ready(10)
                md = GZIP if gzip else []
                base = relay.counts()
                assert c.send_stream(sent, metadata=md, timeout=60) == (4 * MiB, 8, 8)
                up = relay.counts()[0] - base[0]
                base = relay.counts()
                assert c.pull_stream(sizes, metadata=md, timeout=60) == pulled(sizes)
                moved[gzip] = (up, relay.counts()[1] - base[1])
    (up, down), (zup, zdown) = moved[False], moved[True]
    assert up >= 4 * MiB and down >= 4 * MiB, (
        f"uncompressed streams of 4 MiB moved {up} bytes up, {down} down"
    )
    assert zup < MiB // 4, f"the compressed requests still took {zup} bytes on the wire"
    assert zdown < MiB // 4, (
        f"the streamed responses took {zdown} bytes on the wire: the server ignored "
        "x-hpcc-compress: gzip"
    )


@pytest.mark.covers("grpc", *cells(["use_tls"], PEERS))
def test_tls(
    grpc_server: ServerHandle, grpc_mode: str, grpc_tls: Any, grpc_connect: Connect
) -> None:
    """A client trusting our test CA talks to the TLS port; a plaintext client and a client
    trusting another CA cannot."""
    with grpc_connect(grpc_server.tls_target, grpc_mode, ca=grpc_tls.ca) as c:
        payload = [b"secret", Pattern(100_000, 7).materialize()]
        assert c.echo(payload, timeout=30) == payload
    # refusals come as UNAVAILABLE once the handshake fails; the deadline only bounds the
    # wait (an emulated guest's TLS handshake over rsocket took more than 5 s)
    with grpc_connect(grpc_server.tls_target, grpc_mode) as plaintext:
        with pytest.raises(grpc.RpcError) as err:
            plaintext.echo([b"x"], timeout=30)
        assert err.value.code() == Codes.UNAVAILABLE
    with grpc_connect(grpc_server.tls_target, grpc_mode, ca=grpc_tls.other_ca) as wrong:
        with pytest.raises(grpc.RpcError) as err:
            wrong.echo([b"x"], timeout=30)
        assert err.value.code() == Codes.UNAVAILABLE


@pytest.mark.covers("grpc", *cells(["unavailable"], PEERS))
def test_no_server_is_unavailable(
    grpc_server: ServerHandle, grpc_mode: str, grpc_connect: Connect
) -> None:
    """A port with no listener (bound here, never listening, so no one else can take it), on
    the servers' address (an RDMA runtime's is its device's)."""
    with socket.socket() as s:
        s.bind((grpc_server.address, 0))
        port = s.getsockname()[1]
        with grpc_connect(hostport(grpc_server.address, port), grpc_mode) as c:
            t0 = time.monotonic()
            with pytest.raises(grpc.RpcError) as err:
                c.echo([b"x"], timeout=10)
            assert err.value.code() == Codes.UNAVAILABLE
            assert time.monotonic() - t0 < 5, "UNAVAILABLE should come fast, not at the deadline"


@pytest.mark.covers("grpc")  # the suite's own bookkeeping or path, no interop case
@pytest.mark.grpc_runtime(
    "rdma", why="gRPC runtime {runtime} has no RDMA path to prove: it runs over kernel TCP"
)
def test_calls_take_the_runtimes_path(
    grpc_client: TensorClient, grpc_lab: Any, request: pytest.FixtureRequest
) -> None:
    """Under an RDMA runtime the properties above check the runtime, not a fallback: 8 MiB of
    echoes show on the RDMA port's counters, and TCP carried far fewer segments than they
    would need (fabrics/path_proof.py)."""
    rt = grpc_lab.runtime()
    probe = grpc_lab.path_probe(rt, LOOPBACK)
    assert probe is not None, f"gRPC runtime {rt.describe()}: an RDMA preset without RDMA"
    sent = [Pattern(2 * MiB, seed=s).materialize() for s in range(2)]
    before = probe.read()
    for _ in range(2):
        assert grpc_client.echo(sent, timeout=120) == sent
    crossing = probe.crossing(before, 8 * MiB)
    request.node.user_properties.append(("hpccomm_path", crossing.describe()))
    assert crossing.problem() is None, crossing.problem()


@pytest.mark.covers("grpc", *cells(["empty_stream"], PEERS))
def test_empty_stream_ends_ok(grpc_client: TensorClient) -> None:
    """A bidirectional stream the client closes without a message ends OK with no message
    (interop's empty_stream)."""
    assert grpc_client.stream([], timeout=30) == []


@pytest.mark.covers("grpc", *cells(["unimplemented_method", "unimplemented_service"], PEERS))
def test_unknown_method_and_service_are_unimplemented(
    grpc_client: TensorClient, grpc_mode: str
) -> None:
    """A method the service lacks, and a service the server lacks, end UNIMPLEMENTED
    (interop's unimplemented_method and unimplemented_service); the channel keeps working."""
    service = wire.method("Echo", grpc_mode).rsplit("/", 1)[0]
    for path in (f"{service}/NoSuchMethod", "/hpcc.NoSuchService/Echo"):
        call = grpc_client.channel.unary_unary(path)  # bytes in, bytes out
        with pytest.raises(grpc.RpcError) as err:
            call(b"", timeout=30)
        code = err.value.code()
        assert code == Codes.UNIMPLEMENTED, f"{path}: ended {code.name}, not UNIMPLEMENTED"
    assert grpc_client.echo([b"still here"], timeout=30) == [b"still here"]
