"""Memory-region access flags are enforced by the responder (ibv_reg_mr(3), IB spec 10.6.3).

An RDMA WRITE into an MR registered without REMOTE_WRITE (READ without REMOTE_READ, atomic
without REMOTE_ATOMIC, a wrong rkey, a range past the MR's end) must fail with a remote access
error and leave the target's bytes untouched. The positive control — the same WRITE into an MR
that was granted REMOTE_WRITE lands intact — is what catches an MR registered with too few
rights (--hpc-verbs-plant=mr-no-remote-write plants exactly that).

iWARP acknowledges an RDMA WRITE when TCP has taken it, not when the peer placed it: there the
violation surfaces as the responder terminating the connection (the QP leaves RTS and the next
operation fails) rather than as the WRITE's own completion status.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hpccomm.stacks.verbs.defects import known_defects
from pytest_hpccomm.stacks.verbs.driver import ALL_ACCESS, VerbsCallError, VerbsPair
from pytest_hpccomm.stacks.verbs.fixtures import FreshLink

pytestmark = [pytest.mark.conformance, pytest.mark.stack("verbs")]

REMOTE_ACCESS_ERROR = 10  # IBV_WC_REM_ACCESS_ERR
LENGTH = 4096


def without(flag: str) -> tuple[str, ...]:
    return tuple(a for a in ALL_ACCESS if a != flag)


def op(
    opcode: str,
    link: Any,
    *,
    offset: int = 0,
    length: int = LENGTH,
    rkey: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "opcode": opcode,
        "mr": link.mr_a["mr"],
        "offset": 0,
        "length": length,
        "remote_addr": link.mr_b["addr"] + offset,
        "rkey": link.mr_b["rkey"] if rkey is None else rkey,
        "wr_id": 1,
        **extra,
    }


def violation(pair: VerbsPair, link: Any, wr: dict[str, Any]) -> str:
    """Run a WR that breaks the responder's rules; return how the violation surfaced."""
    try:
        wcs = pair.execute(link.a, [wr])  # no completion at all: LinkDown, with the evidence
    except VerbsCallError as exc:
        return f"rejected at post: {exc}"
    if wcs[0]["status"] == REMOTE_ACCESS_ERROR:
        return "remote access error"
    if pair.iwarp:
        # the WRITE left through TCP; the responder's TERMINATE tears the connection down
        probe = op("RDMA_READ", link, length=8) | {"wr_id": 2}
        try:
            after = pair.execute(link.a, [probe], allow_missing=True)
        except VerbsCallError as exc:
            return f"connection terminated: {exc}"
        if not after or after[0]["status"] != 0:  # (siw reports no QP state to ask instead)
            return "connection terminated"
    pytest.fail(
        f"{wr['opcode']} violating the responder's MR completed with "
        f"{wcs[0]['status_text']} and the connection carried on",
        pytrace=False,
    )


def target_digest(link: Any) -> str:
    return str(link.b.peer.call("digest", mr=link.mr_b["mr"], offset=0, length=LENGTH))


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
def test_rdma_write_into_mr_with_remote_write_lands(
    verbs_pair: VerbsPair, verbs_fresh_rc: FreshLink
) -> None:
    link = verbs_fresh_rc()
    want = link.a.peer.call("fill", mr=link.mr_a["mr"], offset=0, length=LENGTH, seed=7)
    wr = op("RDMA_WRITE", link)
    verbs_pair.expect_success(
        verbs_pair.execute(link.a, [wr]), [wr], "RDMA_WRITE into an MR registered with REMOTE_WRITE"
    )
    link.placed()
    assert target_digest(link) == want, "the RDMA WRITE completed but its bytes did not land"


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
def test_rdma_write_without_remote_write_is_rejected(
    verbs_pair: VerbsPair, verbs_fresh_rc: FreshLink
) -> None:
    link = verbs_fresh_rc(b_access=without("remote_write"))
    link.a.peer.call("fill", mr=link.mr_a["mr"], offset=0, length=LENGTH, seed=8)
    before = target_digest(link)
    how = violation(verbs_pair, link, op("RDMA_WRITE", link))
    assert target_digest(link) == before, f"forbidden write changed the target ({how})"


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
def test_rdma_read_without_remote_read_is_rejected(
    verbs_pair: VerbsPair, verbs_fresh_rc: FreshLink
) -> None:
    link = verbs_fresh_rc(b_access=without("remote_read"))
    secret = link.b.peer.call("fill", mr=link.mr_b["mr"], offset=0, length=LENGTH, seed=9)
    with known_defects(verbs_pair.selection.driver, "siw-no-remote-read-check"):
        violation(verbs_pair, link, op("RDMA_READ", link))
        got = link.a.peer.call("digest", mr=link.mr_a["mr"], offset=0, length=LENGTH)
        assert got != secret, "a forbidden RDMA READ returned the target's bytes"


@pytest.mark.covers("verbs", "atomic.AtomicTest.atomic_invalid_mr_access:rxe")
@pytest.mark.verbs_needs("atomics")
def test_atomic_without_remote_atomic_is_rejected(
    verbs_pair: VerbsPair, verbs_fresh_rc: FreshLink
) -> None:
    link = verbs_fresh_rc(b_access=without("remote_atomic"))
    before = target_digest(link)
    violation(verbs_pair, link, op("ATOMIC_FETCH_AND_ADD", link, length=8, compare_add=1))
    assert target_digest(link) == before, "a forbidden atomic changed the target"


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
def test_wrong_rkey_is_rejected(verbs_pair: VerbsPair, verbs_fresh_rc: FreshLink) -> None:
    link = verbs_fresh_rc()
    link.a.peer.call("fill", mr=link.mr_a["mr"], offset=0, length=LENGTH, seed=10)
    before = target_digest(link)
    violation(verbs_pair, link, op("RDMA_WRITE", link, rkey=link.mr_b["rkey"] ^ 0x5A5A00))
    assert target_digest(link) == before


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
def test_write_past_the_end_of_the_mr_is_rejected(
    verbs_pair: VerbsPair, verbs_fresh_rc: FreshLink
) -> None:
    link = verbs_fresh_rc(length=LENGTH)
    link.a.peer.call("fill", mr=link.mr_a["mr"], offset=0, length=LENGTH, seed=11)
    before = target_digest(link)
    violation(verbs_pair, link, op("RDMA_WRITE", link, offset=LENGTH - 64, length=128))
    assert target_digest(link) == before


ATOMIC_VIOLATIONS = {
    # upstream case -> how the FETCH_AND_ADD breaks the rules
    "atomic_invalid_rkey": "a wrong rkey",
    "atomic_invalid_lkey": "a wrong lkey for the local buffer",
    "atomic_non_aligned_addr": "a target address 1 byte past 8-byte alignment",
}


@pytest.mark.covers("verbs", *(f"atomic.AtomicTest.{c}:rxe" for c in ATOMIC_VIOLATIONS))
@pytest.mark.verbs_needs("atomics")
@pytest.mark.parametrize("case", list(ATOMIC_VIOLATIONS))
def test_atomic_that_breaks_the_rules_fails(
    verbs_pair: VerbsPair, verbs_fresh_rc: FreshLink, case: str, record_property: Any
) -> None:
    """A FETCH_AND_ADD with a wrong rkey, a wrong lkey or a misaligned target (atomics act
    on 8-byte aligned words, IB spec 9.4.5) fails. A wrong rkey or a misaligned target leaves
    the target as it was; a wrong lkey guards only the local buffer the old value returns to:
    the responder may have added already (rxe does), but nothing lands locally."""
    link = verbs_fresh_rc()
    local = lambda: str(  # noqa: E731
        link.a.peer.call("digest", mr=link.mr_a["mr"], offset=0, length=LENGTH)
    )
    before, local_before = target_digest(link), local()
    wr = op("ATOMIC_FETCH_AND_ADD", link, length=8, compare_add=1)
    if case == "atomic_invalid_rkey":
        wr["rkey"] = link.mr_b["rkey"] ^ 0x5A5A00
    elif case == "atomic_invalid_lkey":
        wr["lkey"] = link.mr_a["lkey"] ^ 0x7F7F00
    else:
        wr["remote_addr"] = link.mr_b["addr"] + 1
    # upstream's bar: any error, at post or in its completion
    how = verbs_pair.refused(link.a, wr, f"an atomic with {ATOMIC_VIOLATIONS[case]}")
    record_property("atomic_violation", how[:300])
    if case == "atomic_invalid_lkey":
        assert local() == local_before, "the old value landed through a wrong lkey"
    else:
        assert target_digest(link) == before, f"{ATOMIC_VIOLATIONS[case]}: the target changed"


@pytest.mark.covers("verbs", "atomic.AtomicTest.atomic_invalid_qp_access:rxe")
@pytest.mark.verbs_needs("atomics")
def test_atomic_into_a_qp_without_remote_atomic_is_rejected(
    verbs_pair: VerbsPair, record_property: Any
) -> None:
    """QPs whose access flags grant local write only: a FETCH_AND_ADD into an MR that grants
    every right still fails (the responder's QP must allow remote atomics too, IB spec
    9.4.5) and leaves the target as it was."""
    from pytest_hpccomm.stacks.verbs.links import Link

    conn = verbs_pair.connect("RC", access=("local_write",), max_send_wr=16, max_recv_wr=16)
    link = Link(
        verbs_pair, conn, verbs_pair.reg_mr(verbs_pair.a, LENGTH),
        verbs_pair.reg_mr(verbs_pair.b, LENGTH), length=LENGTH,
    )  # fmt: skip
    try:
        before = target_digest(link)
        wr = op("ATOMIC_FETCH_AND_ADD", link, length=8, compare_add=1)
        how = verbs_pair.refused(link.a, wr, "an atomic into a QP without remote atomics")
        record_property("qp_access_refusal", how[:300])
        assert target_digest(link) == before, "a refused atomic changed the target"
    finally:
        link.close()
