"""Ports held on this host for servers that other processes bind later: TensorFlow tasks read
their addresses from a cluster spec written before they start, and bind them many seconds on.

A port probed free and let go can be taken before its server binds it: by the next probe (the
kernel picks a free port at random, so two probes in a row can return the same one) or by any
other bind to port 0. A hold keeps a socket bound to each port with SO_REUSEADDR, never
listening. While it is held, Linux passes the port over for bind to port 0 and for connect()'s
source port, and refuses a bind without SO_REUSEADDR; a server that sets SO_REUSEADDR, as
gRPC does for every listener, still binds and listens on it, on this address or a wildcard.
"""

from __future__ import annotations

import socket


class PortHold:
    """`count` distinct free ports on `host`, held until close(). `with` closes."""

    def __init__(self, count: int, host: str = "127.0.0.1") -> None:
        self._socks: list[socket.socket] = []
        try:
            for _ in range(count):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self._socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((host, 0))
        except BaseException:
            self.close()
            raise
        self.ports = [int(s.getsockname()[1]) for s in self._socks]

    def close(self) -> None:
        for s in self._socks:
            s.close()
        self._socks = []

    def __enter__(self) -> PortHold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
