"""A bounded TCP stream for calibration (stdlib only: runs inside a virtual host).

    python stream.py recv BIND_ADDR PORT          # prints {"bytes": N, "seconds": T} as JSON
    python stream.py send HOST PORT SECONDS       # sends as fast as it can for SECONDS

The receiver times from its first byte to the sender's close, so connection setup and TCP
slow start before the first byte do not dilute the rate. Both ends give up after 60 s.
"""

import json
import socket
import sys
import time

CHUNK = 1 << 20


def recv(addr: str, port: int) -> None:
    with socket.create_server((addr, port)) as srv:
        srv.settimeout(60)
        print("listening", flush=True)
        conn, _ = srv.accept()
        conn.settimeout(60)
        buf = bytearray(CHUNK)
        total, t0 = 0, 0.0
        while True:
            n = conn.recv_into(buf)
            if not n:
                break
            if not total:
                t0 = time.perf_counter()
            total += n
        print(json.dumps({"bytes": total, "seconds": time.perf_counter() - t0}), flush=True)


def send(host: str, port: int, seconds: float) -> None:
    data = b"\0" * CHUNK
    deadline = time.monotonic() + 60
    while True:  # the receiver may not listen yet
        try:
            conn = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    end = time.perf_counter() + seconds
    with conn:
        conn.settimeout(30)
        while time.perf_counter() < end:
            conn.sendall(data)
        conn.shutdown(socket.SHUT_WR)


if __name__ == "__main__":
    if sys.argv[1] == "recv":
        recv(sys.argv[2], int(sys.argv[3]))
    else:
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
