"""Connected links and Hypothesis settings of the verbs conformance tests (behind the verbs
plugin's `verbs_rc`, `verbs_fresh_rc` and `verbs_settings` fixtures)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, settings

from pytest_hpccomm.properties import SLOW
from pytest_hpccomm.properties import property_settings as shared_settings
from pytest_hpccomm.stacks.verbs.driver import (
    ALL_ACCESS,
    Connection,
    LinkDown,
    VerbsPair,
    WorkRequestFailed,
)

MR_BYTES = (4 << 20) + 8192  # several MiB payloads plus offsets and guard bytes

# Hypothesis against a long-lived peer (pytest_hpccomm.properties; the verbs plugin's per-item
# deadline bounds the whole item, shrinking included); the emulated guest (TCG) gets fewer
# examples than hardware. HPCCOMM_VERBS_EXAMPLES overrides.
SUPPRESS = (HealthCheck.function_scoped_fixture, *SLOW)


def examples(emulated: bool, hardware: int = 100, emulation: int = 20) -> int:
    override = os.environ.get("HPCCOMM_VERBS_EXAMPLES")
    if override:
        return int(override)
    return emulation if emulated else hardware


def property_settings(emulated: bool, quick: bool = True) -> settings:
    """The quick profile draws the same examples every run (a catch is every run or never);
    the full profile draws new ones."""
    return shared_settings(examples(emulated), quick, suppress=SUPPRESS)


@dataclass
class Link:
    """A connected RC pair with one MR on each side (a requests, b responds)."""

    pair: VerbsPair
    conn: Connection
    mr_a: dict[str, Any]
    mr_b: dict[str, Any]
    b_access: tuple[str, ...] = ALL_ACCESS
    length: int = MR_BYTES
    suspect: bool = False  # an example failed in a way that may have left the QPs in ERR

    @property
    def a(self) -> Any:
        return self.conn.a

    @property
    def b(self) -> Any:
        return self.conn.b

    def healthy(self) -> bool:
        if self.suspect or self.a.peer.broken or self.b.peer.broken:
            return False
        if self.pair.iwarp:
            # siw reports no QP state (siw_query_qp sets none): ask the link itself
            wr = {
                "opcode": "RDMA_READ",
                "mr": self.mr_a["mr"],
                "offset": 0,
                "length": 8,
                "remote_addr": self.mr_b["addr"],
                "rkey": self.mr_b["rkey"],
                "wr_id": 0,
            }
            try:
                wcs = self.pair.execute(self.a, [wr])
            except LinkDown:
                return False
            return wcs[0]["status"] == 0
        return self.conn.state(self.a) == "RTS" and self.conn.state(self.b) == "RTS"

    @contextmanager
    def example(self) -> Iterator[None]:
        """One Hypothesis example on this link. After an example that may have broken it (an
        error completion moves both RC QPs to ERR; siw TERMINATEs the connection) the next
        one gets a new link: shrinking then replays each candidate on a working link instead
        of feeding a dead one back, and stays meaningful. A wrong answer on a working link
        (bytes, order) keeps it. A dead link raises LinkDown, which ends the item anyway."""
        if self.suspect:
            self.renew()
        try:
            yield
        except BaseException as exc:
            if isinstance(exc, WorkRequestFailed) or not isinstance(exc, AssertionError):
                self.suspect = True
            raise

    def placed(self) -> None:
        """Return once a's RDMA WRITEs are in b's memory. On InfiniBand and RoCE a WRITE
        completes after the responder acknowledged it; on iWARP its completion only frees the
        source buffer (RDMAP, RFC 5040), the bytes may still be in flight: between two guests
        b read stale bytes after 1-4 MiB WRITEs had completed. A READ on the same connection
        is answered only after the earlier WRITEs are placed, so its completion is the fence."""
        if not self.pair.iwarp:
            return
        wr = {
            "opcode": "RDMA_READ",
            "mr": self.mr_a["mr"],
            "offset": self.length - 8,
            "length": 8,
            "remote_addr": self.mr_b["addr"],
            "rkey": self.mr_b["rkey"],
            "wr_id": 0xFE,
        }
        self.pair.expect_success(
            self.pair.execute(self.a, [wr]), [wr], "READ fencing the RDMA WRITEs before them"
        )

    def renew(self) -> None:
        """A new connection and MRs in place of these (tests hold this Link, not its parts)."""
        self.close()
        fresh = make_link(self.pair, self.b_access, self.length)
        self.conn, self.mr_a, self.mr_b, self.suspect = fresh.conn, fresh.mr_a, fresh.mr_b, False

    def close(self) -> None:
        self.conn.close()
        for peer, mr in ((self.a.peer, self.mr_a), (self.b.peer, self.mr_b)):
            if not peer.broken:
                try:
                    peer.call("dereg_mr", mr=mr["mr"])
                except LinkDown:  # the peer died meanwhile: its MRs went with it
                    pass


def make_link(
    pair: VerbsPair,
    b_access: tuple[str, ...] = ALL_ACCESS,
    length: int = MR_BYTES,
    retry_cnt: int = 7,
) -> Link:
    conn = pair.connect("RC", max_send_wr=64, max_recv_wr=64, retry_cnt=retry_cnt)
    mr_a = pair.reg_mr(pair.a, length)
    mr_b = pair.reg_mr(pair.b, length, b_access)
    return Link(pair, conn, mr_a, mr_b, b_access, length)
