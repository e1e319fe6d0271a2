"""The byte-counting relay of the gRPC conformance suite (CountingProxy): once a peer has
received bytes through it, its counts already include them. Real sockets, loopback only."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pytest_hpccomm.stacks.grpc.conformance import CountingProxy

TIMEOUT = 10.0
N = 200_000  # several 64 KiB chunks of the relay each way


class SlowSocket:
    """A relay's socket whose sendall, once it has passed on `N` bytes, holds the relay's
    thread until `release` is set: the moment a peer has everything but the relay's thread
    has not run on. A count made after forwarding comes out short here every time."""

    def __init__(self, sock: socket.socket, release: threading.Event) -> None:
        self._sock, self._release, self._sent = sock, release, 0

    def sendall(self, data: bytes) -> None:
        self._sock.sendall(data)
        self._sent += len(data)  # a wrapper per pump thread: no race on _sent
        if self._sent >= N:
            self._release.wait(TIMEOUT)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class SlowForwardProxy(CountingProxy):
    """CountingProxy whose pump threads forward through SlowSockets."""

    def __init__(self, target: str) -> None:
        self.release = threading.Event()
        super().__init__(target, timeout=TIMEOUT)

    def _spawn(self, fn: Callable[..., None], *args: Any) -> None:
        super()._spawn(
            fn, *(SlowSocket(a, self.release) if isinstance(a, socket.socket) else a for a in args)
        )


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(1 << 16, n - len(buf)))
        assert chunk, f"connection closed after {len(buf)} of {n} bytes"
        buf += chunk
    return bytes(buf)


def send_in_background(sock: socket.socket, data: bytes) -> threading.Thread:
    """sendall in a thread, so a full loopback buffer cannot block the test's reader."""
    t = threading.Thread(target=sock.sendall, args=(data,), daemon=True)
    t.start()
    return t


@pytest.fixture
def upstream() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        srv.settimeout(TIMEOUT)
        yield srv


def test_counts_include_every_byte_a_peer_has_received(upstream: socket.socket) -> None:
    data = bytes(range(256)) * (N // 256) + bytes(N % 256)
    relay = SlowForwardProxy(f"127.0.0.1:{upstream.getsockname()[1]}")
    senders: list[threading.Thread] = []
    try:
        with socket.create_connection(
            ("127.0.0.1", int(relay.target.rsplit(":", 1)[1])), timeout=TIMEOUT
        ) as client:
            conn, _ = upstream.accept()
            with conn:
                conn.settimeout(TIMEOUT)
                senders.append(send_in_background(client, data))
                assert recv_exactly(conn, N) == data
                assert relay.counts()[0] == N, "the server has all it was sent, the count not"
                senders.append(send_in_background(conn, data))
                assert recv_exactly(client, N) == data
                assert relay.counts() == (N, N), "the client has its reply, the count not"
    finally:
        relay.release.set()
        relay.close()
        for t in senders:
            t.join(TIMEOUT)
    assert not any(t.is_alive() for t in [*relay._threads, *senders])
