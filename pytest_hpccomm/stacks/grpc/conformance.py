"""Helpers of the gRPC conformance properties: their Hypothesis settings (behind the
`grpc_settings` fixture), waiting for a server-side effect, and a byte-counting relay."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from hypothesis import settings

from pytest_hpccomm.properties import property_settings as shared_settings
from pytest_hpccomm.stacks.grpc.options import GrpcOptions


def property_settings(opts: GrpcOptions, cap: int | None = None) -> settings:
    """The profile's example budget (--hpc-grpc-examples), at most `cap` for slow properties
    (pytest_hpccomm.properties: derandomized in the quick profile); a planted-bug run keeps
    its failures out of the database."""
    examples = min(opts.examples, cap) if cap else opts.examples
    return shared_settings(examples, opts.quick, database=not opts.plant_bug)


class SettingsFactory(Protocol):
    """What the `grpc_settings` fixture is: settings for a property, at most `cap` examples."""

    def __call__(self, cap: int | None = None) -> settings: ...


def eventually(cond: Callable[[], bool], timeout: float = 3.0) -> bool:
    """Whether `cond` holds within `timeout` s (a server notices a cancellation asynchronously)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


class CountingProxy:
    """A TCP relay on loopback that counts the bytes each way: what gRPC really put on the
    wire (HTTP/2 frames of a plaintext channel), so a property can see whether compression
    took effect, which comparing the bytes that come out cannot. Stops in `close()`."""

    def __init__(self, target: str, timeout: float = 60.0) -> None:
        host, port = target.rsplit(":", 1)
        self._upstream = (host.strip("[]"), int(port))
        self._timeout = timeout
        self._lock = threading.Lock()
        self.to_server = self.to_client = 0
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.target = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._closed = threading.Event()
        self._spawn(self._accept)

    def _spawn(self, fn: Callable[..., None], *args: Any) -> None:
        t = threading.Thread(target=fn, args=args, daemon=True)
        self._threads.append(t)
        t.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                down, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            up = socket.create_connection(self._upstream, timeout=self._timeout)
            for s in (down, up):
                s.settimeout(None)
            with self._lock:
                self._socks += [down, up]
            self._spawn(self._pump, down, up, "to_server")
            self._spawn(self._pump, up, down, "to_client")

    def _pump(self, src: socket.socket, dst: socket.socket, counter: str) -> None:
        try:
            while chunk := src.recv(1 << 16):
                # Count, then forward: once a byte can reach the peer it is in the count. The
                # other order let a client get its whole reply and read `counts()` before this
                # thread, back from sendall, added the last chunk (a 4 MiB echo counted 23 KB
                # short). A chunk counted but never delivered only happens on a broken link.
                with self._lock:
                    setattr(self, counter, getattr(self, counter) + len(chunk))
                dst.sendall(chunk)
        except OSError:
            pass  # the other side closed: the relay ends with it
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)

    def counts(self) -> tuple[int, int]:
        """(to_server, to_client): every byte either peer has received so far, maybe more."""
        with self._lock:
            return self.to_server, self.to_client

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            socks = list(self._socks)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> CountingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
