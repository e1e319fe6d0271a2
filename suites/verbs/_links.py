"""Helpers of the verbs conformance tests: connected links and Hypothesis settings."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings

from pytest_hpccomm.stacks.verbs.driver import ALL_ACCESS, Connection, VerbsPair

MR_BYTES = (4 << 20) + 8192  # several MiB payloads plus offsets and guard bytes

# Hypothesis against a long-lived peer: every example is a few round trips, so no deadline;
# the emulated guest (TCG) gets fewer examples than hardware. HPCCOMM_VERBS_EXAMPLES overrides.
settings.register_profile(
    "verbs", deadline=None, derandomize=False,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large])


def examples(emulated: bool, hardware: int = 100, emulation: int = 20) -> int:
    override = os.environ.get("HPCCOMM_VERBS_EXAMPLES")
    if override:
        return int(override)
    return emulation if emulated else hardware


@dataclass
class Link:
    """A connected RC pair with one MR on each side (a requests, b responds)."""

    pair: VerbsPair
    conn: Connection
    mr_a: dict[str, Any]
    mr_b: dict[str, Any]

    @property
    def a(self) -> Any:
        return self.conn.a

    @property
    def b(self) -> Any:
        return self.conn.b

    def healthy(self) -> bool:
        if self.a.peer.broken or self.b.peer.broken:
            return False
        if self.pair.iwarp:
            # siw reports no QP state (siw_query_qp sets none): ask the link itself
            wr = {"opcode": "RDMA_READ", "mr": self.mr_a["mr"], "offset": 0, "length": 8,
                  "remote_addr": self.mr_b["addr"], "rkey": self.mr_b["rkey"], "wr_id": 0}
            wcs = self.pair.execute(self.a, [wr], timeout=10)
            return bool(wcs) and wcs[0]["status"] == 0
        return self.conn.state(self.a) == "RTS" and self.conn.state(self.b) == "RTS"

    def close(self) -> None:
        self.conn.close()
        for peer, mr in ((self.a.peer, self.mr_a), (self.b.peer, self.mr_b)):
            if not peer.broken:
                peer.call("dereg_mr", mr=mr["mr"])


def make_link(pair: VerbsPair, b_access: tuple[str, ...] = ALL_ACCESS,
              length: int = MR_BYTES) -> Link:
    conn = pair.connect("RC", max_send_wr=64, max_recv_wr=64)
    mr_a = pair.reg_mr(pair.a, length)
    mr_b = pair.reg_mr(pair.b, length, b_access)
    return Link(pair, conn, mr_a, mr_b)


