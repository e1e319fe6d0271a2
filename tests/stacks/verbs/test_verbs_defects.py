"""The known-defect catalogue (stacks/verbs/defects.py) and the kernel log it reads evidence
from: a failure becomes an xfail only with its defect's observed symptom, on that driver.

The symptoms below are the ones the CI guest showed (Linux 6.1.0-56-amd64, siw built from
linux-source-6.1): completions of `[RDMA_READ, SEND]` arriving SEND first, and
`siw: [QP 3]: rresp len: 1 != 0` followed by `siw: got TERMINATE. layer 1, type 1, code 1`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_hpccomm.stacks.verbs import defects
from pytest_hpccomm.stacks.verbs.defects import diagnose, known_defects
from pytest_hpccomm.stacks.verbs.driver import (
    CompletionOrderError,
    LinkDown,
    PeerError,
    WorkRequestFailed,
    expect_posting_order,
)
from pytest_hpccomm.stacks.verbs.kernel_log import KernelLog, parse_record

READS = ("siw-read-completion-order", "siw-rresp-terminate")
RRESP = (
    "[27.115] siw: [QP 3]: rresp len: 1 != 0",
    "[27.117] siw: got TERMINATE. layer 1, type 1, code 1",
)


def order_error(posted: list[str], completed: list[str]) -> CompletionOrderError:
    def parse(items: list[str]) -> list[dict[str, object]]:
        return [{"opcode": op, "wr_id": int(i)} for op, i in (x.split("#") for x in items)]

    with pytest.raises(CompletionOrderError) as info:
        expect_posting_order(parse(completed), parse(posted))
    return info.value


def test_a_read_overtaken_by_later_work_requests_is_the_siw_defect() -> None:
    exc = order_error(
        ["RDMA_READ#100", "SEND#101", "RDMA_WRITE#102"],
        ["SEND#101", "RDMA_WRITE#102", "RDMA_READ#100"],
    )
    reason = diagnose("siw", exc, READS)
    assert reason and "siw-read-completion-order" in reason
    assert "RDMA_READ#100 completed after SEND#101, RDMA_WRITE#102" in reason


@pytest.mark.parametrize(
    "completed",
    [
        ["RDMA_WRITE#102", "SEND#101", "RDMA_READ#100"],  # a WRITE overtook a SEND too
        ["RDMA_READ#103", "SEND#101", "RDMA_WRITE#102", "RDMA_READ#100"],  # READs swapped
    ],
    ids=["send-write-reordered", "reads-reordered"],
)
def test_any_other_reordering_stays_a_failure(completed: list[str]) -> None:
    posted = ["RDMA_READ#100", "SEND#101", "RDMA_WRITE#102"]
    if "RDMA_READ#103" in completed:
        posted.append("RDMA_READ#103")
    assert diagnose("siw", order_error(posted, completed), READS) is None


def test_a_known_symptom_on_another_driver_stays_a_failure() -> None:
    exc = order_error(["RDMA_READ#100", "SEND#101"], ["SEND#101", "RDMA_READ#100"])
    assert diagnose("rxe", exc, READS) is None


def test_a_dead_link_is_the_rresp_defect_only_with_its_kernel_evidence() -> None:
    dead = LinkDown("siw0: 6 of 9 send completions within 5.0 s", qp_state="RESET", kernel=RRESP)
    reason = diagnose("siw", dead, READS)
    assert (
        reason
        and "siw-rresp-terminate: observed siw: [QP 3]: rresp len: 1 != 0; "
        "siw: got TERMINATE. layer 1, type 1, code 1"
        in reason
    )
    assert diagnose("siw", LinkDown("no completions", kernel=RRESP[1:]), READS) is None
    assert diagnose("siw", PeerError("peer0: no reply within 25s"), READS) is None
    failed = WorkRequestFailed("RDMA_READ wr_id=104 completed with status 21", RRESP)
    assert diagnose("siw", failed, READS)


def test_every_part_of_a_group_must_be_known() -> None:
    known = order_error(["RDMA_READ#100", "SEND#101"], ["SEND#101", "RDMA_READ#100"])
    assert diagnose(
        "siw", BaseExceptionGroup("two bugs", [known, LinkDown("x", kernel=RRESP)]), READS
    )
    assert (
        diagnose("siw", ExceptionGroup("two bugs", [known, AssertionError("bytes")]), READS) is None
    )


def test_known_defects_xfails_with_the_observation_and_lets_the_rest_through() -> None:
    with pytest.raises(pytest.xfail.Exception, match=r"observed .*RDMA_READ#100.*kernel "):
        with known_defects("siw", *READS):
            raise order_error(["RDMA_READ#100", "SEND#101"], ["SEND#101", "RDMA_READ#100"])
    with pytest.raises(AssertionError, match="bytes differ"):
        with known_defects("siw", *READS):
            raise AssertionError("bytes differ")
    with known_defects("siw", *READS):
        pass  # a pass stays a pass
    with pytest.raises(KeyError):
        with known_defects("siw", "no-such-defect"):
            pass


def test_the_catalogue_explains_every_entry() -> None:
    for key, defect in defects.CATALOGUE.items():
        assert defect.key == key and defect.driver in ("siw", "rxe")
        assert len(defect.explanation) > 60, key


def test_kmsg_records_are_parsed() -> None:
    record = "4,1234,27115824,-;siw: [QP 3]: rresp len: 1 != 0\n SUBSYSTEM=infiniband\n"
    assert parse_record(record) == "[27.116] siw: [QP 3]: rresp len: 1 != 0"
    assert parse_record("no separator") is None


def test_an_unreadable_kernel_log_says_so_in_one_line(tmp_path: Path) -> None:
    log = KernelLog(str(tmp_path / "missing"))
    log.mark()
    lines = log.since()
    assert len(lines) == 1 and "kernel log unreadable" in lines[0]


def test_kernel_log_reads_to_the_end_without_blocking() -> None:
    if not os.access("/dev/kmsg", os.R_OK):
        pytest.skip("/dev/kmsg is not readable here")
    log = KernelLog()
    log.mark()
    try:
        lines = log.since()  # whatever the drivers said just now: it must return at once
        assert all(line.startswith("[") or "more lines" in line for line in lines), lines
    finally:
        log.close()
