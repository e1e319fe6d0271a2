"""The native relay (native/relay.cc, peer/relay.py): the conformance suite's calls made by the
native peer, against a real native server on loopback. What the suite's properties rely on:
bytes and statuses come back exactly, on every RPC shape, metadata keeps its type and its
place (initial or trailing), a deadline and a cancellation end the call as grpcio's would,
and a relay that dies or hangs is a one-line failure naming it, never a hang; closing it
reaps the process."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from pytest_hpccomm.stacks.grpc.build import NativeBuild
from pytest_hpccomm.stacks.grpc.driver import ServerHandle, start_server
from pytest_hpccomm.stacks.grpc.peer.payload import buffers_for
from tests.native_grpc import native_build_or_skip

grpc = pytest.importorskip("grpc", reason="stack 'grpc' not available: missing grpc")
from pytest_hpccomm.stacks.grpc import wire  # noqa: E402
from pytest_hpccomm.stacks.grpc.peer.pyclient import TensorClient  # noqa: E402
from pytest_hpccomm.stacks.grpc.peer.relay import UNARY, RelayBroken, RelayChannel, RelayError  # noqa: E402


@pytest.fixture(scope="module")
def native() -> NativeBuild:
    return native_build_or_skip()


@pytest.fixture(scope="module")
def server(native: NativeBuild) -> Iterator[ServerHandle]:
    s = start_server("native", native, lifetime=120)
    yield s
    s.stop()


@pytest.fixture
def client(native: NativeBuild, server: ServerHandle) -> Iterator[TensorClient]:
    with TensorClient(server.target, "raw", channel=RelayChannel(native.peer, server.target)) as c:
        c.wait_ready(10)
        yield c


def test_bytes_come_back_exactly(client: TensorClient) -> None:
    sent = [b"", bytes(range(256)) * 4099, b"\0" * (5 << 20)]
    assert client.echo(sent, timeout=60) == sent
    assert client.send(sent, timeout=60) == sum(map(len, sent))
    assert client.stream([[b"a"], [b"bc"], []], timeout=30) == [(0, [b"a"]), (1, [b"bc"]), (2, [])]


def test_client_and_server_streams_come_back_exactly(client: TensorClient) -> None:
    """The stream record carries every streaming shape: many requests to one answer
    (SendStream), one request to many (PullStream)."""
    assert client.send_stream([[b"ab"], [], [b"c", b"def"]], timeout=30) == (6, 3, 3)
    assert client.send_stream([], timeout=30) == (0, 0, 0)
    sizes = [3, 0, 70_000]
    assert client.pull_stream(sizes, timeout=30) == list(enumerate([b] for b in buffers_for(sizes)))


def test_a_client_stream_with_other_than_one_answer_is_internal(client: TensorClient) -> None:
    """As grpcio: a client-streaming call answered twice fails INTERNAL (here EchoStream's
    two answers, called as client streaming)."""
    call = client.channel.stream_unary(wire.method("EchoStream", "raw"))
    with pytest.raises(RelayError) as err:
        call([wire.encode_frame([b"a"]), wire.encode_frame([b"b"])], timeout=10)
    assert err.value.code() == grpc.StatusCode.INTERNAL


def test_a_status_comes_back_as_grpcio_raises_it(client: TensorClient) -> None:
    bad = wire.encode_frame([b"abc"], seq=1)[:-1]
    with pytest.raises(grpc.RpcError) as err:
        client.m["Echo"](bad, timeout=10)
    assert isinstance(err.value, RelayError)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and err.value.details()
    message = "\t\nwhitespace\r\n\u263a \U0001f608 \0%41\t\n"
    asked = [(wire.STATUS, "9"), (wire.STATUS_MESSAGE, message.encode())]
    with pytest.raises(RelayError) as err:
        client.echo([b"x"], metadata=asked, timeout=10)
    assert (err.value.code(), err.value.details()) == (grpc.StatusCode.FAILED_PRECONDITION, message)


def test_metadata_keeps_its_type(client: TensorClient) -> None:
    md = [("x-hpcc-a", "text"), ("x-hpcc-b-bin", b"\0\xff")]
    _, call = client.echo_call([b"m"], metadata=md, timeout=10)
    back = [(k, v) for k, v in call.trailing_metadata() if k.startswith("x-hpcc-")]
    assert sorted(back) == sorted(md)


def test_metadata_keeps_its_place(client: TensorClient) -> None:
    """Initial metadata comes back apart from trailing metadata, in a unary call and a stream."""
    initial = [("x-hpcc-initial-a", "text"), ("x-hpcc-initial-b-bin", b"\0\xff")]
    trailing = [("x-hpcc-c", "t")]
    for _, call in (
        client.echo_call([b"m"], metadata=initial + trailing, timeout=10),
        client.stream_call([[b"m"]], metadata=initial + trailing, timeout=10),
    ):
        got = [
            sorted(kv for kv in md if kv[0].startswith("x-hpcc-"))
            for md in (
                call.initial_metadata(),
                call.trailing_metadata(),
            )
        ]
        assert got == [sorted(initial), trailing]


def test_deadline_and_cancellation_end_the_call(client: TensorClient) -> None:
    with pytest.raises(grpc.RpcError) as err:
        client.delay(5_000, 1, timeout=0.2)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert 0.2 <= err.value.answer.elapsed < 2.0
    assert client.cancelled_delay(5_000, 2, after=0.1, timeout=30) == grpc.StatusCode.CANCELLED
    read, code = client.cancelled_stream(3, timeout=30)
    assert code == grpc.StatusCode.CANCELLED and read >= 1


def test_no_listener_is_not_ready(native: NativeBuild) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        ch = RelayChannel(native.peer, f"127.0.0.1:{s.getsockname()[1]}")
        try:
            assert ch.ready(0.5) is False
        finally:
            ch.close()


def test_a_dead_relay_is_a_failure_naming_it(native: NativeBuild, server: ServerHandle) -> None:
    ch = RelayChannel(native.peer, server.target)
    try:
        os.kill(ch._proc.pid, signal.SIGKILL)
        ch._proc.wait(timeout=10)
        with pytest.raises(RelayBroken, match=r"native relay to .*exited -9"):
            ch.call(UNARY, wire.method("Echo", "raw"), [wire.encode_frame([b"x"])], 5)
    finally:
        ch.close()


def test_a_malformed_record_ends_the_relay_saying_why(
    native: NativeBuild, server: ServerHandle
) -> None:
    ch = RelayChannel(native.peer, server.target)
    try:
        with pytest.raises(RelayBroken, match="malformed call record"):
            ch.call(9, "/x", [], 5)
    finally:
        ch.close()


def test_close_reaps_the_relay(native: NativeBuild, server: ServerHandle) -> None:
    ch = RelayChannel(native.peer, server.target)
    assert ch.ready(10)
    pid = ch._proc.pid
    ch.close()
    assert ch._proc.returncode == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
