"""Whose TCP is it: bytes the kernel sent over TCP, and how many of them left through sockets a
process holds. siw (software iWARP) carries RDMA over kernel TCP sockets that no process holds
(the kernel's own), and counts nothing on its port; a runtime that fell back to plain TCP sends
through its own sockets. nftables tells them apart: `meta skuid` matches only a socket with a
file behind it, so a kernel socket's packets never match (net/netfilter/nft_meta.c). Nor do
those a process's socket still sends after its close (orphaned): a peer that closes with data
in flight lends the kernel's share a little, never the payload of a run.

One table of this process (`inet hpccomm_owners_<pid>`), output hook, counters only (every
packet is accepted); `close()` deletes it, also after a failure.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass

from pytest_hpccomm.errors import Unavailable
from pytest_hpccomm.proc.jobs import run_job

NFT_TIMEOUT = 15.0
ALL, OWNED = "hpccomm-tcp-all", "hpccomm-tcp-owned"  # the two counters' rule comments


class OwnersUnavailable(Unavailable):
    """No nft, no permission, or a rule it refused (one line: the command and its error)."""


@dataclass(frozen=True)
class TcpBytes:
    total: int  # every TCP byte this network namespace sent
    owned: int  # of which through sockets a process holds

    @property
    def kernel(self) -> int:
        """Sent through the kernel's own sockets (siw's, NFS's...)."""
        return self.total - self.owned


def _nft(*args: str) -> str:
    got = run_job(["nft", *args], timeout=NFT_TIMEOUT, label=f"nft {' '.join(args[:3])}")
    if not got.ok:
        raise OwnersUnavailable(f"nft {' '.join(args[:4])}: {got.stderr.strip() or got.describe()}")
    return got.stdout


def parse_counters(listing: str) -> TcpBytes:
    """The two counters of `nft -j list table` output."""
    found: dict[str, int] = {}
    for item in json.loads(listing).get("nftables", []):
        rule = item.get("rule")
        if not rule or rule.get("comment") not in (ALL, OWNED):
            continue
        for expr in rule.get("expr", []):
            if "counter" in expr:
                found[rule["comment"]] = int(expr["counter"]["bytes"])
    if set(found) != {ALL, OWNED}:
        raise OwnersUnavailable(f"nft listing without the counters {ALL} and {OWNED}")
    return TcpBytes(found[ALL], found[OWNED])


class TcpOwnersMeter:
    """Counts TCP bytes sent, all and through processes' sockets, until closed."""

    def __init__(self) -> None:
        if shutil.which("nft") is None:
            raise OwnersUnavailable("nftables is not installed (apt-get install nftables)")
        self.table = f"hpccomm_owners_{os.getpid()}"
        _nft("add", "table", "inet", self.table)
        try:
            _nft(
                "add",
                "chain",
                "inet",
                self.table,
                "out",
                "{ type filter hook output priority 0 ; policy accept ; }",
            )
            _nft(
                "add",
                "rule",
                "inet",
                self.table,
                "out",
                "meta",
                "l4proto",
                "tcp",
                "counter",
                "comment",
                f'"{ALL}"',
            )
            _nft(
                "add",
                "rule",
                "inet",
                self.table,
                "out",
                "meta",
                "l4proto",
                "tcp",
                "meta",
                "skuid",
                ">=",
                "0",
                "counter",
                "comment",
                f'"{OWNED}"',
            )
        except OwnersUnavailable:
            self.close()
            raise

    def read(self) -> TcpBytes:
        return parse_counters(_nft("-j", "list", "table", "inet", self.table))

    def close(self) -> None:
        run_job(
            ["nft", "delete", "table", "inet", self.table],
            timeout=NFT_TIMEOUT,
            label="nft delete table",
        )
