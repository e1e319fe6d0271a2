"""Known defects of the software RDMA drivers, keyed by what a failure shows.

A test names the defects that may affect it (`with known_defects(driver, "key", ...)`) and
runs its property as always. A failure becomes an xfail only when the driver is the one the
defect is known on and the failure carries the defect's symptom; the reason then says what was
observed. Any other failure stays a failure, and a pass stays a pass: nothing here guesses from
a kernel version, and no property is excused in advance (an `xfail(strict=False)` would let it
never fail). The kernel a run used is in the results' fingerprint (`kernel`, `driver`).
"""

from __future__ import annotations

import platform
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from pytest_hpccomm.stacks.verbs.driver import (
    CompletionOrderError,
    LinkDown,
    PeerError,
    WorkRequestFailed,
)


@dataclass(frozen=True)
class Defect:
    key: str
    driver: str  # where it is known: "siw", "rxe"
    explanation: str
    symptom: Callable[[BaseException], str | None]  # what this failure shows of it, or None


def _read_overtaken(exc: BaseException) -> str | None:
    """Completions out of order only because RDMA READs completed after WRs posted behind
    them: with the READs taken out, both orders agree, and some READ did come late."""
    if not isinstance(exc, CompletionOrderError):
        return None
    posted, completed = exc.posted, exc.completed
    if sorted(posted) != sorted(completed):
        return None  # missing or unexpected completions: not a reordering
    if [p for p in posted if p[0] != "RDMA_READ"] != [c for c in completed if c[0] != "RDMA_READ"]:
        return None
    reads = [p for p in posted if p[0] == "RDMA_READ"]
    if [p for p in completed if p[0] == "RDMA_READ"] != reads:
        return None  # READs among themselves must keep their order too
    late = []
    for op, wr_id in reads:
        after = posted[posted.index((op, wr_id)) + 1 :]
        before = completed[: completed.index((op, wr_id))]
        overtook = [f"{o}#{i}" for o, i in before if (o, i) in after]
        if overtook:
            late.append(f"{op}#{wr_id} completed after {', '.join(overtook)}")
    return "; ".join(late) or None


RRESP_LEN = re.compile(r"siw: \[QP \d+\]: rresp len: \d+ != \d+")
TERMINATE = re.compile(r"siw: got TERMINATE\b[^|;]*")


def _rresp_terminate(exc: BaseException) -> str | None:
    """A work request failed (an error status, or no completion: the link died) and siw logged
    a READ response whose length did not match the outstanding READ (then TERMINATE)."""
    if not isinstance(exc, (LinkDown, WorkRequestFailed)) or isinstance(exc, PeerError):
        return None
    rresp = [m.group(0) for line in exc.kernel for m in [RRESP_LEN.search(line)] if m]
    term = [m.group(0) for line in exc.kernel for m in [TERMINATE.search(line)] if m]
    return "; ".join(rresp[:1] + term[:1]) if rresp else None


def _message(pattern: str) -> Callable[[BaseException], str | None]:
    """A failure (assert or pytest.fail) whose message matches `pattern`."""
    regex = re.compile(pattern)

    def symptom(exc: BaseException) -> str | None:
        if not isinstance(exc, (AssertionError, pytest.fail.Exception)):
            return None
        found = regex.search(str(exc))
        return found.group(0) if found else None

    return symptom


CATALOGUE = {
    d.key: d
    for d in (
        Defect(
            "siw-read-completion-order",
            "siw",
            "siw completes an RDMA READ when its response arrives, after SENDs and WRITEs posted "
            "behind it have completed on transmission (Linux 6.1 siw_qp_tx.c moves the READ to "
            "the ORQ; siw_qp_rx.c completes it later), against IB spec 10.8.3's posting order",
            _read_overtaken,
        ),
        Defect(
            "siw-rresp-terminate",
            "siw",
            "with a zero-length RDMA READ outstanding among others, siw matches a READ response to "
            "an outstanding READ of another length (Linux 6.1 siw_qp_rx.c siw_rresp_check_ntoh: "
            "'rresp len: N != 0', a DDP base-bounds error): the READ fails with a general error, "
            "siw TERMINATEs the connection, and the work requests behind it never complete",
            _rresp_terminate,
        ),
        Defect(
            "siw-no-remote-read-check",
            "siw",
            "siw does not enforce REMOTE_READ: it sends READ responses from memory it checks with "
            "no permissions (Linux 6.1 siw_qp_tx.c siw_qp_sq_proc_tx: siw_check_sgl_tx(qp->pd, "
            "wqe, 0), 'w/o checking access')",
            _message(
                r"RDMA_READ violating the responder's MR completed with success"
                r"|a forbidden RDMA READ returned the target's bytes"
            ),
        ),
        Defect(
            "siw-no-qp-state",
            "siw",
            "siw's ibv_query_qp reports no state: siw_query_qp() (Linux 6.1 siw_verbs.c) never "
            "sets qp_attr->qp_state, so a QP of a working connection reads as RESET (0)",
            _message(r"connected QPs report RESET, RESET|ibv_query_qp of a new QP says RESET"),
        ),
        Defect(
            "rxe-retry-cnt-7-forever",
            "rxe",
            "rxe retransmits forever when retry_cnt is 7: its completer decrements the count only "
            "when it is not 7 (Linux 6.1 rxe_comp.c, COMPST_ERROR_RETRY: `if (qp->comp.retry_cnt "
            "!= 7) qp->comp.retry_cnt--`), where IBTA's 7 is seven retries and only rnr_retry 7 "
            "means forever",
            _message(r"retry_cnt 7: no completion in [\d.]+ s of a lost responder"),
        ),
    )
}


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions of a group (Hypothesis reports several bugs, or a flaky one, as one)."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def diagnose(driver: str | None, exc: BaseException, keys: tuple[str, ...]) -> str | None:
    """The xfail reason when every part of `exc` shows one of the named defects of `driver`,
    else None (the failure stands)."""
    defects = [CATALOGUE[k] for k in keys]
    seen: list[str] = []
    for leaf in _leaves(exc):
        for defect in defects:
            if defect.driver != driver:
                continue
            symptom = defect.symptom(leaf)
            if symptom:
                seen.append(
                    f"known {driver} defect {defect.key}: observed {symptom}. {defect.explanation}"
                )
                break
        else:
            return None
    return " | ".join(dict.fromkeys(seen)) or None


@contextmanager
def known_defects(driver: str | None, *keys: str) -> Iterator[None]:
    """Run the block; a failure showing one of these defects' symptoms becomes an xfail."""
    unknown = [k for k in keys if k not in CATALOGUE]
    if unknown:
        raise KeyError(f"no known defect {unknown} (catalogue: {sorted(CATALOGUE)})")
    try:
        yield
    except (KeyboardInterrupt, pytest.skip.Exception, pytest.xfail.Exception):
        raise
    except BaseException as exc:
        reason = diagnose(driver, exc, keys)
        if reason is None:
            raise
        pytest.xfail(f"{reason} (kernel {platform.release()})")
