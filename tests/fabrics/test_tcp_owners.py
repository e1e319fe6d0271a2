"""Whose TCP (fabrics/tcp_owners.py): nftables counts TCP bytes sent, all and through sockets a
process holds. The counters parse from `nft -j` output; a live meter sees this process's own
loopback transfer as owned, and leaves no table behind."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from pytest_hpccomm.fabrics.tcp_owners import (
    ALL,
    OWNED,
    OwnersUnavailable,
    TcpOwnersMeter,
    parse_counters,
)
from pytest_hpccomm.proc.jobs import run_job

MiB = 1 << 20


def listing(all_bytes: int | None, owned_bytes: int | None) -> str:
    rules = [
        {
            "rule": {
                "comment": name,
                "expr": [
                    {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": 6}},
                    {"counter": {"packets": 3, "bytes": value}},
                ],
            }
        }
        for name, value in ((ALL, all_bytes), (OWNED, owned_bytes))
        if value is not None
    ]
    return json.dumps(
        {
            "nftables": [
                {"metainfo": {"version": "1.0.6"}},
                {"table": {"family": "inet", "name": "t"}},
                *rules,
            ]
        }
    )


def test_counters_parse_from_nft_json() -> None:
    got = parse_counters(listing(5000, 1200))
    assert (got.total, got.owned, got.kernel) == (5000, 1200, 3800)
    with pytest.raises(OwnersUnavailable, match="without the counters"):
        parse_counters(listing(5000, None))


@pytest.mark.needs_root
def test_a_process_transfer_is_owned_and_the_table_goes() -> None:
    try:
        meter = TcpOwnersMeter()
    except OwnersUnavailable as e:
        pytest.skip(str(e))
    try:
        before = meter.read()
        with socket.create_server(("127.0.0.1", 0)) as srv:

            def drain() -> None:
                conn, _ = srv.accept()
                with conn:
                    while conn.recv(1 << 16):
                        pass

            t = threading.Thread(target=drain)
            t.start()
            with socket.create_connection(srv.getsockname()) as c:
                c.sendall(b"\0" * (4 * MiB))
                c.shutdown(socket.SHUT_WR)
                # closed only once all is received: what a closed socket still has to send
                # goes out orphaned, without a file, and counts as the kernel's
                t.join(timeout=30)
        after = meter.read()
    finally:
        meter.close()
    owned, total = after.owned - before.owned, after.total - before.total
    assert owned >= 4 * MiB and total >= owned, (owned, total)
    tables = run_job(["nft", "list", "tables"], timeout=15).stdout
    assert meter.table not in tables
