"""Data path properties, driven by Hypothesis against the session's long-lived peers.

- integrity: SEND, RDMA WRITE and RDMA READ move exactly the bytes asked for, 0 B to 4 MiB, at
  any offset in source and target, and touch nothing around them (guard bytes unchanged)
- ordering: completions of one QP's send queue arrive in posting order (IB spec 10.8.3:
  "work completions are returned in the order the work requests were posted" for RC)
- atomics: FETCH_AND_ADD and CMP_AND_SWP return the target's previous 64-bit value and leave
  (old + add) mod 2^64, or swap-if-equal, in the target

Every example runs on the shared link (`verbs_rc`, stacks/verbs/links.py) inside
`rc.example()`, which re-makes it after an example that may have broken it, so Hypothesis never
shrinks on a dead link; completions that
miss their deadline raise LinkDown, which ends the item with the evidence (driver.py). Known
driver defects are matched by their observed symptom (stacks/verbs/defects.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_hpccomm.stacks.verbs.defects import known_defects
from pytest_hpccomm.stacks.verbs.driver import VerbsPair, expect_posting_order
from pytest_hpccomm.stacks.verbs.links import MR_BYTES, Link

pytestmark = [pytest.mark.conformance, pytest.mark.stack("verbs")]

MAX_PAYLOAD = 4 << 20
GUARD = 64
# sizes around the boundaries that matter: 0, MTU multiples +-1, page and MiB edges; then any
# size, most of them small (a multi-MiB example costs seconds under emulation)
EDGES = [
    0,
    1,
    7,
    8,
    63,
    64,
    255,
    256,
    1023,
    1024,
    1025,
    2047,
    2048,
    4095,
    4096,
    4097,
    65535,
    65536,
    1 << 20,
    (1 << 20) + 1,
    MAX_PAYLOAD - 1,
    MAX_PAYLOAD,
]
sizes = st.one_of(st.sampled_from(EDGES), st.integers(0, 1 << 16), st.integers(0, MAX_PAYLOAD))
offsets = st.integers(0, 4096 - 1)
U64 = st.integers(0, (1 << 64) - 1)


def _side(link: Link, side: str) -> tuple[Any, dict[str, Any]]:
    return (link.a.peer, link.mr_a) if side == "a" else (link.b.peer, link.mr_b)


def _around(offset: int, size: int) -> list[list[int]]:
    """The guard regions just before and after [offset, offset + size)."""
    start = max(0, offset - GUARD)
    return [[start, offset - start], [offset + size, GUARD]]


def guarded(link: Link, side: str, offset: int, size: int, seed: int) -> list[str]:
    """Fill the target region and its neighbourhood with a known pattern; return the guard
    bytes' digests, to check afterwards that nothing around the region was written."""
    peer, mr = _side(link, side)
    start = max(0, offset - GUARD)
    peer.call("fill", mr=mr["mr"], offset=start, length=offset + size + GUARD - start, seed=seed)
    return list(peer.call("digests", mr=mr["mr"], regions=_around(offset, size)))


def check(
    link: Link, side: str, offset: int, size: int, want: str, guards: list[str], what: str
) -> None:
    peer, mr = _side(link, side)
    got, *after = peer.call(
        "digests", mr=mr["mr"], regions=[[offset, size], *_around(offset, size)]
    )
    assert got == want, f"{what}: the {size} bytes at offset {offset} differ from the source"
    assert after == guards, f"{what}: bytes next to the {size}-byte region were overwritten"


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
@pytest.mark.parametrize("opcode", ["SEND", "RDMA_WRITE", "RDMA_READ"])
def test_payload_integrity(
    opcode: str, verbs_rc: Link, verbs_pair: VerbsPair, verbs_settings: settings
) -> None:
    assert MR_BYTES >= 4096 + MAX_PAYLOAD + GUARD
    rc = verbs_rc

    @verbs_settings
    @given(size=sizes, src_off=offsets, dst_off=offsets, seed=st.integers(0, 2**32))
    @example(size=0, src_off=0, dst_off=0, seed=1)
    @example(size=MAX_PAYLOAD, src_off=4095, dst_off=1, seed=2)
    def prop(size: int, src_off: int, dst_off: int, seed: int) -> None:
        with rc.example():
            transfer(size, src_off, dst_off, seed)

    def transfer(size: int, src_off: int, dst_off: int, seed: int) -> None:
        # READ pulls b's bytes into a; SEND and WRITE push a's bytes into b
        src, dst = ("b", "a") if opcode == "RDMA_READ" else ("a", "b")
        src_peer, src_mr = _side(rc, src)
        want = src_peer.call("fill", mr=src_mr["mr"], offset=src_off, length=size, seed=seed)
        guards = guarded(rc, dst, dst_off, size, seed + 1)
        if opcode == "SEND":
            rc.b.peer.call(
                "post_recv", ep=rc.b.ep, mr=rc.mr_b["mr"], offset=dst_off, length=size, wr_id=seed
            )
        local, remote = (rc.mr_a, rc.mr_b)
        wr = {
            "opcode": opcode,
            "mr": local["mr"],
            "wr_id": seed & 0xFFFF,
            "offset": dst_off if opcode == "RDMA_READ" else src_off,
            "length": size,
            "remote_addr": remote["addr"] + (src_off if opcode == "RDMA_READ" else dst_off),
            "rkey": remote["rkey"],
        }
        verbs_pair.expect_success(verbs_pair.execute(rc.a, [wr]), [wr], f"{opcode} {size} B")
        if opcode == "RDMA_WRITE":
            rc.placed()  # iWARP: the completion alone does not say the bytes arrived
        if opcode == "SEND":
            recv = verbs_pair.poll(rc.b, "recv", count=1, nbytes=size)
            verbs_pair.expect_success(
                recv, [{"wr_id": seed, "opcode": "RECV"}], f"RECV of {size} B"
            )
            assert recv[0]["byte_len"] == size, (
                f"RECV reported {recv[0]['byte_len']} bytes for a {size}-byte SEND"
            )
        check(rc, dst, dst_off, size, want, guards, f"{opcode} {size} B")

    prop()


MIXES = {"send-write": ["SEND", "RDMA_WRITE"], "with-read": ["SEND", "RDMA_WRITE", "RDMA_READ"]}
# what siw is known to do with READs in the mix (defects.py): overtaken completions, and a READ
# response matched to a zero-length READ, which TERMINATEs the connection
READ_DEFECTS = ("siw-read-completion-order", "siw-rresp-terminate")


RECV_WR_ID = 500


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
@pytest.mark.parametrize("mix", sorted(MIXES))
def test_completions_arrive_in_posting_order(
    mix: str, verbs_rc: Link, verbs_pair: VerbsPair, verbs_settings: settings
) -> None:
    rc = verbs_rc

    @verbs_settings
    @given(
        ops=st.lists(
            st.tuples(st.sampled_from(MIXES[mix]), st.integers(0, 8192)), min_size=1, max_size=24
        )
    )
    def prop(ops: list[tuple[str, int]]) -> None:
        with rc.example():
            post_in_order(ops)

    def post_in_order(ops: list[tuple[str, int]]) -> None:
        sends = [n for o, n in ops if o == "SEND"]
        if sends:
            rc.b.peer.call(
                "post_recv",
                ep=rc.b.ep,
                mr=rc.mr_b["mr"],
                offset=0,
                length=8192,
                count=len(sends),
                wr_id=RECV_WR_ID,
            )
        wrs = [
            {
                "opcode": o,
                "mr": rc.mr_a["mr"],
                "offset": 0,
                "length": n,
                "wr_id": 100 + i,
                "remote_addr": rc.mr_b["addr"],
                "rkey": rc.mr_b["rkey"],
            }
            for i, (o, n) in enumerate(ops)
        ]
        wcs = verbs_pair.execute(rc.a, wrs)
        verbs_pair.expect_success(wcs, wrs, "mixed work requests")
        received = []
        if sends:  # drain the receives before judging the order: none are left behind
            received = verbs_pair.poll(rc.b, "recv", count=len(sends), nbytes=sum(sends))
        expect_posting_order(wcs, wrs)
        # the receive queue is FIFO: the k-th SEND consumes the k-th receive posted
        got = [(w["wr_id"], w["byte_len"]) for w in received]
        want = [(RECV_WR_ID + k, n) for k, n in enumerate(sends)]
        assert got == want, (
            f"receive completions (wr_id, byte_len) {got}, expected the "
            f"receives in posting order {want}"
        )

    keys = READ_DEFECTS if mix == "with-read" else ()
    with known_defects(verbs_pair.selection.driver, *keys):
        prop()


def _u64_bytes(value: int, order: str) -> str:
    return value.to_bytes(8, order).hex()  # type: ignore[arg-type]


def _u64(hexed: str, order: str) -> int:
    return int.from_bytes(bytes.fromhex(hexed), order)  # type: ignore[arg-type]


@pytest.mark.covers("verbs", "atomic.AtomicTest.atomic_fetch_and_add:rxe")
def test_fetch_and_add_returns_old_value(
    verbs_rc: Link, verbs_pair: VerbsPair, verbs_settings: settings, verbs_atomic_order: str
) -> None:
    rc, atomic_order = verbs_rc, verbs_atomic_order

    @verbs_settings
    @given(old=U64, add=U64, slot=st.integers(0, 63))
    @example(old=(1 << 64) - 1, add=1, slot=0)
    def prop(old: int, add: int, slot: int) -> None:
        with rc.example():
            fetch_add(old, add, slot)

    def fetch_add(old: int, add: int, slot: int) -> None:
        at = 8 * slot  # atomics need 8-byte aligned targets
        rc.b.peer.call("write", mr=rc.mr_b["mr"], offset=at, hex=_u64_bytes(old, atomic_order))
        wr = {
            "opcode": "ATOMIC_FETCH_AND_ADD",
            "mr": rc.mr_a["mr"],
            "offset": at,
            "length": 8,
            "remote_addr": rc.mr_b["addr"] + at,
            "rkey": rc.mr_b["rkey"],
            "compare_add": add,
        }
        verbs_pair.expect_success(verbs_pair.execute(rc.a, [wr]), [wr], "FETCH_AND_ADD")
        returned = _u64(rc.a.peer.call("read", mr=rc.mr_a["mr"], offset=at, length=8), atomic_order)
        now = _u64(rc.b.peer.call("read", mr=rc.mr_b["mr"], offset=at, length=8), atomic_order)
        assert returned == old, f"FETCH_AND_ADD returned {returned:#x}, target held {old:#x}"
        assert now == (old + add) % (1 << 64), f"target is {now:#x}, not {old:#x} + {add:#x}"

    prop()


@pytest.mark.covers("verbs", "atomic.AtomicTest.atomic_cmp_and_swap:rxe")
def test_compare_and_swap_returns_old_value(
    verbs_rc: Link, verbs_pair: VerbsPair, verbs_settings: settings, verbs_atomic_order: str
) -> None:
    rc, atomic_order = verbs_rc, verbs_atomic_order

    @verbs_settings
    @given(old=U64, compare=U64, swap=U64, equal=st.booleans(), slot=st.integers(0, 63))
    def prop(old: int, compare: int, swap: int, equal: bool, slot: int) -> None:
        with rc.example():
            compare_swap(old, compare, swap, equal, slot)

    def compare_swap(old: int, compare: int, swap: int, equal: bool, slot: int) -> None:
        compare = old if equal else compare
        at = 8 * slot
        rc.b.peer.call("write", mr=rc.mr_b["mr"], offset=at, hex=_u64_bytes(old, atomic_order))
        wr = {
            "opcode": "ATOMIC_CMP_AND_SWP",
            "mr": rc.mr_a["mr"],
            "offset": at,
            "length": 8,
            "remote_addr": rc.mr_b["addr"] + at,
            "rkey": rc.mr_b["rkey"],
            "compare_add": compare,
            "swap": swap,
        }
        verbs_pair.expect_success(verbs_pair.execute(rc.a, [wr]), [wr], "CMP_AND_SWP")
        returned = _u64(rc.a.peer.call("read", mr=rc.mr_a["mr"], offset=at, length=8), atomic_order)
        now = _u64(rc.b.peer.call("read", mr=rc.mr_b["mr"], offset=at, length=8), atomic_order)
        assert returned == old, f"CMP_AND_SWP returned {returned:#x}, target held {old:#x}"
        want = swap if compare == old else old
        assert now == want, f"target is {now:#x}, want {want:#x} (compare {compare:#x})"

    prop()
