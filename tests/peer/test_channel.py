"""The control channel: authenticated JSON both ways, never unpickling, always with timeouts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable

import pytest

from pytest_hpccomm.peer.channel import (
    ADDRESS_VAR,
    KEY_VAR,
    AuthenticationError,
    ChannelClosed,
    ChannelError,
    ControlServer,
    MessageError,
    PeerClient,
    RemoteError,
)


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # handed to the test
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_round_trip_unix() -> None:
    with ControlServer() as srv:
        assert isinstance(srv.address, str) and os.path.exists(srv.address)
        t, out = in_thread(lambda: PeerClient.connect(srv.address, srv.authkey, timeout=5))
        ch = srv.accept(5)
        t.join(5)
        peer = out["value"]
        ch.send({"op": "ping", "payload": [1, 2.5, "x", None, {"n": True}]})
        assert peer.recv(5) == {"op": "ping", "payload": [1, 2.5, "x", None, {"n": True}]}
        peer.send({"op": "pong"})
        assert ch.recv(5) == {"op": "pong"}
        peer.close()
        with pytest.raises(ChannelClosed):
            ch.recv(5)
        path = srv.address
    assert not os.path.exists(path)  # its private directory is gone too


def test_round_trip_tcp_loopback() -> None:
    with ControlServer(("127.0.0.1", 0)) as srv:
        assert isinstance(srv.address, tuple) and srv.address[1] > 0
        assert srv.env()[ADDRESS_VAR] == f"tcp:127.0.0.1:{srv.address[1]}"
        t, out = in_thread(lambda: PeerClient.from_env(srv.env(), timeout=5, consume=False))
        ch = srv.accept(5)
        t.join(5)
        out["value"].send({"hello": 1})
        assert ch.recv(5) == {"hello": 1}
        out["value"].close()


def test_wrong_key_is_refused_and_server_keeps_serving() -> None:
    with ControlServer() as srv:
        t, out = in_thread(lambda: PeerClient.connect(srv.address, b"not the key", timeout=5))
        with pytest.raises(AuthenticationError):
            srv.accept(5)
        t.join(5)
        assert isinstance(out["error"], AuthenticationError)  # the client learns it too
        assert srv.rejected == 1
        t, out = in_thread(lambda: PeerClient.connect(srv.address, srv.authkey, timeout=5))
        ch = srv.accept(5)
        t.join(5)
        out["value"].send({"ok": True})
        assert ch.recv(5) == {"ok": True}


def test_non_json_is_rejected_cleanly() -> None:
    with ControlServer() as srv:
        t, out = in_thread(lambda: PeerClient.connect(srv.address, srv.authkey, timeout=5))
        ch = srv.accept(5)
        t.join(5)
        peer = out["value"]
        import pickle  # what an attacker would send: it must never be unpickled

        peer._conn.send_bytes(pickle.dumps(RuntimeError("pickled")))
        with pytest.raises(MessageError, match="not JSON"):
            ch.recv(5)
        peer._conn.send_bytes(b"[1, 2]")
        with pytest.raises(MessageError, match="not a JSON object"):
            ch.recv(5)
        peer.send({"still": "fine"})  # the connection survives a bad frame
        assert ch.recv(5) == {"still": "fine"}
        with pytest.raises(TypeError):
            ch.send(["not", "an", "object"])  # type: ignore[arg-type]


def test_accept_and_recv_time_out() -> None:
    with ControlServer(handshake_timeout=0.5) as srv:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            srv.accept(0.3)
        assert time.monotonic() - t0 < 2
        # a client that connects and says nothing cannot block the server
        mute = socket.socket(socket.AF_UNIX)
        mute.connect(srv.address)  # type: ignore[arg-type]
        with pytest.raises(TimeoutError):
            srv.accept(5)
        mute.close()
        t, out = in_thread(lambda: PeerClient.connect(srv.address, srv.authkey, timeout=5))
        ch = srv.accept(5)
        t.join(5)
        with pytest.raises(TimeoutError):
            ch.recv(0.2)
        out["value"].close()


def test_accept_peers_skips_bad_clients() -> None:
    with ControlServer() as srv:

        def dial(key: bytes) -> Callable[[], PeerClient]:
            return lambda: PeerClient.connect(srv.address, key, timeout=5)

        # the bad client first: connections are accepted in the order they came, so it is
        # met (and rejected) before the two good ones are enough
        clients = [in_thread(dial(b"bad"))]
        time.sleep(0.3)
        clients += [in_thread(dial(k)) for k in (srv.authkey, srv.authkey)]
        chans = srv.accept_peers(2, timeout=10)
        assert len(chans) == 2 and srv.rejected == 1
        for t, _ in clients:
            t.join(5)


def test_accept_peers_stops_when_the_peers_are_gone_and_closes_the_accepted() -> None:
    """A launcher that died ends the wait at once with its reason, not at the timeout."""
    with ControlServer() as srv:
        t, got = in_thread(lambda: PeerClient.connect(srv.address, srv.authkey, timeout=5))
        asked = []

        def gone() -> str:
            asked.append(time.monotonic())
            return "the peers' job ended" if "value" in got else ""  # once one is in

        t0 = time.monotonic()
        with pytest.raises(ChannelClosed, match=r"the peers' job ended \(1 of 2 peers had"):
            srv.accept_peers(2, timeout=60, gone=gone)
        assert time.monotonic() - t0 < 30 and len(asked) >= 2
        t.join(5)
        with pytest.raises((ChannelClosed, TimeoutError)):  # the accepted one was closed
            got["value"].recv(5)
        got["value"].close()
        with pytest.raises(TimeoutError, match="0 of 1 peers connected"):
            srv.accept_peers(1, timeout=0.3)


ECHO = [sys.executable, "-m", "pytest_hpccomm.peer.channel"]


def test_peer_process_from_env_request_response() -> None:
    with ControlServer() as srv:
        env = dict(os.environ, **srv.env())
        peer = subprocess.Popen(ECHO, env=env)
        try:
            ch = srv.accept(20)
            hello = ch.recv(10)
            assert hello["op"] == "hello" and hello["pid"] == peer.pid
            # the key travelled by environment, never argv, and the peer dropped it from its own
            with open(f"/proc/{peer.pid}/cmdline", "rb") as f:
                assert srv.authkey.hex().encode() not in f.read()
            assert ch.request({"op": "env"}, timeout=10) == {
                ADDRESS_VAR: srv.env()[ADDRESS_VAR],
                KEY_VAR: None,
            }
            # the peer side imports no pytest and no orchestrator module
            assert ch.request({"op": "modules"}, timeout=10) == [
                "pytest_hpccomm",
                "pytest_hpccomm.peer",
            ]
            assert ch.request({"op": "echo", "x": [1, 2]}, timeout=10) == {
                "op": "echo",
                "x": [1, 2],
                "id": 3,
            }
            with pytest.raises(RemoteError, match="RuntimeError: asked to fail"):
                ch.request({"op": "fail"}, timeout=10)
            assert ch.request({"op": "shutdown"}, timeout=10) == "bye"
            assert peer.wait(10) == 0
        finally:
            if peer.poll() is None:
                peer.kill()
                peer.wait()


def test_from_env_errors() -> None:
    with pytest.raises(ChannelError, match="not set"):
        PeerClient.from_env({})
    with pytest.raises(ChannelError, match="not hex"):
        PeerClient.from_env({ADDRESS_VAR: "unix:/x", KEY_VAR: "zz"})
    with pytest.raises(ChannelError, match="expected unix:PATH or tcp:HOST:PORT"):
        PeerClient.from_env({ADDRESS_VAR: "udp:1.2.3.4", KEY_VAR: "00"})


@pytest.mark.needs_root
def test_peer_in_a_virtual_host_dials_home_over_the_unix_socket() -> None:
    from pytest_hpccomm.cluster.virtual import VirtualCluster, unavailable_reason

    if unavailable_reason():
        pytest.skip(unavailable_reason() or "")
    with VirtualCluster(1) as vc, ControlServer() as srv:
        env = dict(os.environ, **srv.env())
        job = vc.start_job(0, ECHO, env, timeout=30)
        try:
            ch = srv.accept(20)
            assert ch.recv(10)["host"] == "h0"  # it runs in the namespace, under its hostname
            assert ch.request({"op": "shutdown"}, timeout=10) == "bye"
            assert job.wait(10).ok
        finally:
            job.stop()
