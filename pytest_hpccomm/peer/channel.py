"""The control channel between pytest (ControlServer) and long-lived peers (PeerClient).

The peer dials home. Authentication is multiprocessing.connection's HMAC challenge in both
directions with a per-session random key; the key reaches peers by environment
(HPCCOMM_CONTROL_KEY, hex), never argv. Messages are JSON objects framed by
send_bytes/recv_bytes: nothing that comes off the wire is ever unpickled.

Why not Listener.accept(): it cannot time out, and a client that connects and then says
nothing blocks its handshake forever. So the server owns a plain listening socket and runs the
same challenge functions Listener uses (deliver_challenge / answer_challenge) on a socket with
a receive timeout; a client with the wrong key gets AuthenticationError on its side, the server
drops it and keeps serving.

Peer programs import this module alone: stdlib only, no pytest, no orchestrator modules.
"""

from __future__ import annotations

import faulthandler
import itertools
import json
import os
import secrets
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from typing import Any, Callable, Mapping, Self

__all__ = [
    "ADDRESS_VAR",
    "DUMP_SIGNAL",
    "KEY_VAR",
    "STACKS_DIR_VAR",
    "AuthenticationError",
    "Channel",
    "ChannelClosed",
    "ChannelError",
    "ControlServer",
    "MessageError",
    "PeerClient",
    "RemoteError",
    "register_dump",
    "register_fatal",
]

ADDRESS_VAR = "HPCCOMM_CONTROL_ADDRESS"  # "unix:/path/ctl.sock" or "tcp:HOST:PORT"
KEY_VAR = "HPCCOMM_CONTROL_KEY"  # hex of the session's authkey
MAX_MESSAGE = 64 << 20  # a larger frame is refused (and ends the connection)
HANDSHAKE_TIMEOUT = 10.0
STALL_TIMEOUT = 60.0  # once a message has begun, the rest must arrive within this
# a peer that dialed home writes every thread's Python traceback on this signal (faulthandler),
# so an orchestrator that finds it silent can say where it hung: into STACKS_DIR_VAR/<pid>.txt
# where the orchestrator made that directory on this file system, else to its stderr
DUMP_SIGNAL = signal.SIGUSR1
STACKS_DIR_VAR = "HPCCOMM_STACKS_DIR"
_dump_file: list[Any] = []  # kept open for the process's life: faulthandler writes to its fd

Address = str | tuple[str, int]
Message = dict[str, Any]


class ChannelError(Exception):
    """Base of the channel's own errors."""


class ChannelClosed(ChannelError, EOFError):
    """The other side closed the connection."""


class MessageError(ChannelError):
    """A frame that is not a JSON object (the connection stays usable, unless too long)."""


class RemoteError(ChannelError):
    """The other side answered a request with an error."""


def format_address(address: Address) -> str:
    if isinstance(address, tuple):
        host, port = address
        return f"tcp:{host}:{port}"
    return f"unix:{address}"


def parse_address(text: str) -> Address:
    kind, _, rest = text.partition(":")
    if kind == "unix" and rest:
        return rest
    if kind == "tcp":
        host, _, port = rest.rpartition(":")
        if host and port.isdigit():
            return host.strip("[]"), int(port)
    raise ChannelError(f"{ADDRESS_VAR}={text!r}: expected unix:PATH or tcp:HOST:PORT")


def _set_timeouts(sock: socket.socket, seconds: float) -> None:
    """Kernel-level timeouts (SO_RCVTIMEO/SO_SNDTIMEO): they act on the plain os.read/os.write
    that Connection uses, while the fd stays blocking."""
    tv = struct.pack("ll", int(seconds), int((seconds % 1) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)


def _handshake(sock: socket.socket, authkey: bytes, server: bool, timeout: float) -> Connection:
    """Mutual HMAC challenge; returns the Connection or raises AuthenticationError /
    TimeoutError / ChannelClosed. The socket is consumed either way."""
    _set_timeouts(sock, timeout)
    conn = Connection(sock.detach())
    try:
        if server:
            deliver_challenge(conn, authkey)
            answer_challenge(conn, authkey)
        else:
            answer_challenge(conn, authkey)
            deliver_challenge(conn, authkey)
    except BlockingIOError:  # SO_RCVTIMEO expired: the other side said nothing
        conn.close()
        raise TimeoutError(f"no handshake within {timeout:.0f}s") from None
    except EOFError:
        conn.close()
        raise ChannelClosed("closed during the handshake") from None
    except BaseException:
        conn.close()
        raise
    with socket.socket(fileno=os.dup(conn.fileno())) as s:
        _set_timeouts(s, STALL_TIMEOUT)
    return conn


class Channel:
    """JSON objects over an authenticated connection, plus request/response by id."""

    def __init__(self, conn: Connection, peer: str = "") -> None:
        self._conn = conn
        self.peer = peer
        self._ids = itertools.count(1)
        self.events: list[Message] = []  # messages that arrived while waiting for a reply

    def fileno(self) -> int:
        return self._conn.fileno()

    @property
    def closed(self) -> bool:
        return self._conn.closed

    def send(self, msg: Mapping[str, Any]) -> None:
        if not isinstance(msg, Mapping):
            raise TypeError(f"a message is a JSON object (dict), not {type(msg).__name__}")
        data = json.dumps(msg, separators=(",", ":")).encode()
        if len(data) > MAX_MESSAGE:
            raise MessageError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE}")
        try:
            self._conn.send_bytes(data)
        except (BrokenPipeError, ConnectionResetError) as e:
            raise ChannelClosed(f"peer {self.peer or '?'} went away: {e}") from None

    def recv(self, timeout: float | None = None) -> Message:
        """The next message; TimeoutError if none starts within timeout (None: wait)."""
        try:
            ready = self._conn.poll(timeout)
        except EOFError:
            raise ChannelClosed(f"peer {self.peer or '?'} closed the channel") from None
        if not ready:
            raise TimeoutError(f"no message from {self.peer or 'peer'} within {timeout}s")
        try:
            data = self._conn.recv_bytes(MAX_MESSAGE)
        except EOFError:
            raise ChannelClosed(f"peer {self.peer or '?'} closed the channel") from None
        except BlockingIOError:
            raise TimeoutError(f"message from {self.peer or 'peer'} stalled") from None
        except OSError as e:  # "bad message length": framing is lost, so is the connection
            self.close()
            raise MessageError(f"unreadable frame: {e}") from None
        try:
            msg = json.loads(data)
        except (UnicodeDecodeError, ValueError):
            raise MessageError(f"not JSON: {data[:60]!r}") from None
        if not isinstance(msg, dict):
            raise MessageError(f"not a JSON object: {data[:60]!r}")
        return msg

    def request(self, msg: Mapping[str, Any], timeout: float = 30.0) -> Any:
        """Send msg with a fresh id; return the matching reply's result or raise RemoteError.
        Other messages arriving meanwhile are kept in .events."""
        return self.await_reply(self.send_request(msg), timeout, str(msg.get("op", "request")))

    def send_request(self, msg: Mapping[str, Any]) -> int:
        """Send msg with a fresh id and return the id (await_reply collects the answer; a
        caller talking to several peers sends to all before waiting on any)."""
        rid = next(self._ids)
        self.send({**msg, "id": rid})
        return rid

    def await_reply(self, rid: int, timeout: float, what: str = "request") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply to {what!r} within {timeout}s")
            reply = self.recv(left)
            if reply.get("id") == rid and "ok" in reply:
                if not reply["ok"]:
                    raise RemoteError(str(reply.get("error", "unknown error")))
                return reply.get("result")
            self.events.append(reply)

    def reply(
        self, request: Mapping[str, Any], result: Any = None, error: str | None = None
    ) -> None:
        if error is None:
            self.send({"id": request.get("id"), "ok": True, "result": result})
        else:
            self.send({"id": request.get("id"), "ok": False, "error": error})

    def close(self) -> None:
        if not self._conn.closed:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ControlServer:
    """pytest's end. address: None = a Unix socket in a fresh private directory (one machine,
    also across network namespaces, which share the filesystem); a path = that Unix socket;
    (host, port) = TCP (port 0 picks one)."""

    def __init__(
        self,
        address: Address | None = None,
        *,
        authkey: bytes | None = None,
        backlog: int = 64,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
    ) -> None:
        self.authkey = authkey or secrets.token_bytes(32)
        self.handshake_timeout = handshake_timeout
        self._tmpdir: str | None = None
        if address is None:
            self._tmpdir = tempfile.mkdtemp(prefix="hpccomm-ctl-")  # mode 0700
            address = os.path.join(self._tmpdir, "ctl.sock")
        if isinstance(address, tuple):
            family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
            self._sock = socket.socket(family, socket.SOCK_STREAM)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        else:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.bind(address)
            self._sock.listen(backlog)
        except BaseException:
            self.close()
            raise
        self.address: Address = (
            self._sock.getsockname()[:2] if isinstance(address, tuple) else address
        )
        self.rejected = 0  # clients that failed the handshake

    def env(self) -> dict[str, str]:
        """What a peer needs in its environment to dial home."""
        return {ADDRESS_VAR: format_address(self.address), KEY_VAR: self.authkey.hex()}

    def accept(self, timeout: float) -> Channel:
        """The next authenticated peer. A client that fails the handshake raises (so a test
        can see it) and the server stays ready for the next; TimeoutError if none comes."""
        self._sock.settimeout(timeout)
        try:
            sock, addr = self._sock.accept()
        except socket.timeout:
            raise TimeoutError(f"no peer connected within {timeout}s") from None
        sock.setblocking(True)
        try:
            conn = _handshake(sock, self.authkey, server=True, timeout=self.handshake_timeout)
        except (AuthenticationError, TimeoutError, ChannelClosed, OSError):
            self.rejected += 1
            raise
        return Channel(conn, peer=str(addr) if addr else "")

    def accept_peers(
        self, n: int, timeout: float, gone: Callable[[], str] = lambda: ""
    ) -> list[Channel]:
        """n authenticated peers within timeout (else TimeoutError); failed handshakes are
        skipped and counted. `gone()` is asked at least every 0.5 s: a reason (the peers' job
        ended, say) ends the wait at once with ChannelClosed naming it."""
        deadline = time.monotonic() + timeout
        out: list[Channel] = []
        while len(out) < n:
            left = deadline - time.monotonic()
            why = gone()
            if why or left <= 0:
                for ch in out:
                    ch.close()
                if why:
                    raise ChannelClosed(f"{why} ({len(out)} of {n} peers had connected)")
                raise TimeoutError(f"{len(out)} of {n} peers connected within {timeout:.0f}s")
            try:
                out.append(self.accept(min(0.5, left)))
            except (AuthenticationError, ChannelClosed, OSError, TimeoutError):
                continue
        return out

    def close(self) -> None:
        self._sock.close()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def register_dump(env: Mapping[str, str]) -> None:
    """On DUMP_SIGNAL, write every thread's Python traceback (see STACKS_DIR_VAR). Only where
    the signal still has its default action: a handler the runtime under test installed
    (getsignal says None for one set from C) is left to it."""
    if signal.getsignal(DUMP_SIGNAL) != signal.SIG_DFL:
        return
    where = env.get(STACKS_DIR_VAR, "")
    if where and os.path.isdir(where):
        _dump_file[:] = [open(os.path.join(where, f"{os.getpid()}.txt"), "w")]
        faulthandler.register(DUMP_SIGNAL, file=_dump_file[0], all_threads=True)
    else:
        faulthandler.register(DUMP_SIGNAL, all_threads=True)


def register_fatal() -> None:
    """After register_dump: a fatal signal (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL) also
    writes this process's Python traceback, "Fatal Python error: Segmentation fault" first,
    into its dump file, then the runtime's own handler runs as before. A crash then leaves
    evidence the driver reads itself: a launcher may end the job without forwarding the
    runtime's crash message (MPICH's Hydra once said only "process manager error")."""
    if _dump_file:
        faulthandler.enable(file=_dump_file[0], all_threads=True)


class PeerClient(Channel):
    """The peer's end."""

    @classmethod
    def connect(cls, address: Address, authkey: bytes, timeout: float = 30.0) -> PeerClient:
        if isinstance(address, tuple):
            sock = socket.create_connection(address, timeout=timeout)
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            try:
                sock.connect(address)
            except BaseException:
                sock.close()
                raise
        sock.setblocking(True)
        conn = _handshake(sock, authkey, server=False, timeout=timeout)
        return cls(conn, peer=format_address(address))

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        consume: bool = True,
    ) -> PeerClient:
        """Dial home using ADDRESS_VAR and KEY_VAR. consume: drop the key from os.environ so
        programs this peer starts do not inherit it."""
        env = os.environ if env is None else env
        try:
            address, key_hex = env[ADDRESS_VAR], env[KEY_VAR]
        except KeyError as e:
            raise ChannelError(f"{e.args[0]} is not set: not started by pytest-hpccomm") from None
        try:
            key = bytes.fromhex(key_hex)
        except ValueError:
            raise ChannelError(f"{KEY_VAR} is not hex") from None
        if consume:
            os.environ.pop(KEY_VAR, None)
        client = cls.connect(parse_address(address), key, timeout)
        register_dump(env)
        return client

    def serve(self, handler: Callable[[Message], Any], stop_op: str = "shutdown") -> None:
        """Answer requests until {"op": stop_op} or the server closes: handler(msg) -> result,
        an exception becomes an error reply."""
        while True:
            try:
                msg = self.recv(None)
            except ChannelClosed:
                return
            except MessageError as e:
                print(f"hpccomm peer: {e}", file=sys.stderr)
                continue
            if msg.get("op") == stop_op:
                self.reply(msg, "bye")
                return
            try:
                result = handler(msg)
            except Exception as e:
                self.reply(msg, error=f"{type(e).__name__}: {e}")
            else:
                self.reply(msg, result)


def _echo_main() -> int:
    """`python -m pytest_hpccomm.peer.channel`: a peer that echoes (used by the tests)."""
    with PeerClient.from_env() as peer:

        def handle(msg: Message) -> Any:
            if msg.get("op") == "modules":
                return sorted(
                    m
                    for m in sys.modules
                    if m.split(".")[0] in ("pytest", "_pytest", "pytest_hpccomm")
                )
            if msg.get("op") == "env":
                return {k: os.environ.get(k) for k in (ADDRESS_VAR, KEY_VAR)}
            if msg.get("op") == "fail":
                raise RuntimeError("asked to fail")
            return msg

        peer.send({"op": "hello", "pid": os.getpid(), "host": socket.gethostname()})
        peer.serve(handle)
    return 0


if __name__ == "__main__":
    sys.exit(_echo_main())
