"""The native relay (native/relay.cc, peer/relay.py): the conformance suite's calls made by the
native peer, against a real native server on loopback. What the suite's properties rely on:
bytes and statuses come back exactly, metadata keeps its type, a deadline and a cancellation
end the call as grpcio's would, and a relay that dies or hangs is a one-line failure naming
it, never a hang; closing it reaps the process."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from pytest_hpccomm.stacks.grpc.build import NativeBuild
from pytest_hpccomm.stacks.grpc.driver import ServerHandle, start_server
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


def test_a_status_comes_back_as_grpcio_raises_it(client: TensorClient) -> None:
    bad = wire.encode_frame([b"abc"], seq=1)[:-1]
    with pytest.raises(grpc.RpcError) as err:
        client.m["Echo"](bad, timeout=10)
    assert isinstance(err.value, RelayError)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and err.value.details()


def test_metadata_keeps_its_type(client: TensorClient) -> None:
    md = [("x-hpcc-a", "text"), ("x-hpcc-b-bin", b"\0\xff")]
    _, call = client.echo_call([b"m"], metadata=md, timeout=10)
    back = [(k, v) for k, v in call.trailing_metadata() if k.startswith("x-hpcc-")]
    assert sorted(back) == sorted(md)


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
