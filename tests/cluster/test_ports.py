"""Held ports (cluster/ports.py): nothing else on this host gets one while it is held, and a
server that sets SO_REUSEADDR, as gRPC and so TensorFlow do, binds and serves on it.

"Nothing else" is shown deterministically: a socket limited to one local port
(IP_LOCAL_PORT_RANGE, Linux 6.3) must be refused that port by bind to port 0 and by connect()
while it is held, and granted it once released."""

from __future__ import annotations

import errno
import socket
import struct
from concurrent import futures

import pytest

from pytest_hpccomm.cluster.ports import PortHold

IP_LOCAL_PORT_RANGE = 51  # linux/in.h


def only_port(port: int) -> socket.socket:
    """A TCP socket whose automatic local port can only be `port`."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.IPPROTO_IP, IP_LOCAL_PORT_RANGE, struct.pack("I", port << 16 | port))
    except OSError as exc:
        s.close()
        if exc.errno == errno.ENOPROTOOPT:
            pytest.skip(f"this kernel has no IP_LOCAL_PORT_RANGE (Linux >= 6.3): {exc}")
        raise
    return s


def test_held_ports_are_distinct_and_refused_to_plain_binds() -> None:
    with PortHold(16) as held:
        assert len(set(held.ports)) == 16, held.ports
        for port in held.ports:
            with socket.socket() as s, pytest.raises(OSError) as refused:
                s.bind(("0.0.0.0", port))
            assert refused.value.errno == errno.EADDRINUSE


def test_a_held_port_is_not_handed_out_by_bind_0_or_connect_until_released() -> None:
    held = PortHold(2)
    port, closed = held.ports
    try:
        with only_port(port) as s, pytest.raises(OSError) as refused:
            s.bind(("127.0.0.1", 0))
        assert refused.value.errno == errno.EADDRINUSE
        with only_port(port) as s, pytest.raises(OSError) as refused:
            s.connect(("127.0.0.1", closed))  # nobody listens there: the source port first
        assert refused.value.errno == errno.EADDRNOTAVAIL
    finally:
        held.close()
    with only_port(port) as s:
        s.bind(("127.0.0.1", 0))
        assert s.getsockname()[1] == port


def test_a_grpc_server_without_reuseport_binds_and_serves_a_held_port() -> None:
    """TensorFlow's servers are gRPC servers with SO_REUSEPORT off; they bind all interfaces."""
    grpc = pytest.importorskip("grpc")
    with PortHold(1) as held:
        port = held.ports[0]
        server = grpc.server(futures.ThreadPoolExecutor(1), options=[("grpc.so_reuseport", 0)])
        echo = grpc.unary_unary_rpc_method_handler(lambda req, ctx: req)
        server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("t.Echo", {"Call": echo})]
        )
        try:
            assert server.add_insecure_port(f"[::]:{port}") == port
            server.start()
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                assert channel.unary_unary("/t.Echo/Call")(b"held", timeout=30) == b"held"
        finally:
            server.stop(None)
