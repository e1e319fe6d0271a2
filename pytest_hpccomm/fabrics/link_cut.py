"""Cut the RDMA path of this host for a while: every RoCE v2 packet arriving on a netdev is
dropped (an nftables rule on the netdev's ingress hook, the first place a frame off the wire
meets), which a QP sees as a cable pulled out: no ACK comes back, the requester retransmits
`retry_cnt` times and completes in error (IBV_WC_RETRY_EXC_ERR).

Only RoCE's UDP port is dropped: the control channels and ssh to the other hosts go over the
same link and keep working, so the suite can still ask what happened. netem is not in these
kernels, and tc's drop action (act_gact) is not in every one either; nftables is. The table is
this process's own and is deleted when the block is left, also on errors.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from pytest_hpccomm.proc.jobs import run_job

ROCE_V2_PORT = 4791
NFT_TIMEOUT = 15.0


class CutError(Exception):
    """The rule could not be installed (one line: the nft command and its error)."""


def _nft(*args: str) -> tuple[bool, str]:
    got = run_job(["nft", *args], timeout=NFT_TIMEOUT, label=f"nft {' '.join(args[:3])}")
    return got.ok, (got.stderr.strip() or got.stdout.strip() or got.describe())


@contextmanager
def roce_cut(netdev: str, host: str = "this host") -> Iterator[str]:
    """Drop incoming RoCE v2 (UDP 4791) on netdev; yields the fault's description."""
    table = f"hpccomm_cut_{os.getpid()}"
    ok, out = _nft("add", "table", "netdev", table)
    if not ok:
        raise CutError(f"nft add table netdev {table}: {out}")
    try:
        for args in (
            [
                "add",
                "chain",
                "netdev",
                table,
                "in",
                f"{{ type filter hook ingress device {netdev} priority 0 ; }}",
            ],
            ["add", "rule", "netdev", table, "in", "udp", "dport", str(ROCE_V2_PORT), "drop"],
        ):
            ok, out = _nft(*args)
            if not ok:
                raise CutError(f"nft {' '.join(args[:4])} (ingress of {netdev}): {out}")
        yield (
            f"cut the RDMA path: every RoCE v2 packet (UDP {ROCE_V2_PORT}) arriving on "
            f"{netdev} of {host} dropped (nftables, netdev ingress)"
        )
    finally:
        _nft("delete", "table", "netdev", table)
