"""Judging a verbs work request's completions: did every one complete, successfully, and in
posting order; and what to say when not.

The checks raise AssertionErrors that carry what the defect catalogue (defects.py) matches
on: the kernel log a failure came with, the posted and completed orders.
"""

from __future__ import annotations

from typing import Any


class WorkRequestFailed(AssertionError):
    """A work request completed with an error status, or did not complete. `kernel`: what the
    RDMA drivers logged meanwhile, when the check was given a kernel log (VerbsPair's)."""

    def __init__(self, message: str, kernel: tuple[str, ...] = ()) -> None:
        super().__init__(message + (f"; kernel log: {' | '.join(kernel)}" if kernel else ""))
        self.kernel = kernel


def describe_missing(
    wcs: list[dict[str, Any]], wrs: list[dict[str, Any]], n: int, wait: float, cq: str
) -> str:
    """'3 of 5 send completions within 5.0 s (none for RDMA_READ#103, SEND#104); completed:
    SEND#100 success, ...'."""
    text = f"{len(wcs)} of {n} {cq} completions within {wait:.1f} s"
    ids = sorted(
        {int(w.get("wr_id", 0)) for w in wrs if w.get("signaled", True)}
        - {int(c["wr_id"]) for c in wcs}
    )
    if ids:
        ops = {int(w.get("wr_id", 0)): w.get("opcode", "SEND") for w in wrs}
        text += (
            " (none for "
            + ", ".join(f"{ops[i]}#{i}" for i in ids[:8])
            + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
            + ")"
        )
    if wcs:
        shown = ", ".join(f"{c['opcode']}#{c['wr_id']} {c['status_text']}" for c in wcs[:8])
        text += f"; completed: {shown}" + (", ..." if len(wcs) > 8 else "")
    return text


def expect_success(wcs: list[dict[str, Any]], wrs: list[dict[str, Any]], what: str) -> None:
    """Every WR completed successfully, or a failure that says which one and how."""
    signalled = [w for w in wrs if w.get("signaled", True)]
    if len(wcs) < len(signalled):
        missing = sorted(
            {int(w.get("wr_id", 0)) for w in signalled} - {int(c["wr_id"]) for c in wcs}
        )
        raise WorkRequestFailed(
            f"{what}: {len(wcs)} of {len(signalled)} work requests "
            f"completed (no completion for wr_id {missing})"
        )
    bad = [c for c in wcs if c["status"] != 0]
    if bad:
        c = bad[0]
        wr = next((w for w in wrs if w.get("wr_id") == c["wr_id"]), {})
        raise WorkRequestFailed(
            f"{what}: {wr.get('opcode', c['opcode'])} wr_id={c['wr_id']} completed with status "
            f"{c['status']} ({c['status_text']}), vendor error {c['vendor_err']:#x}"
            + (f"; {len(bad) - 1} more failed" if len(bad) > 1 else "")
        )


class CompletionOrderError(AssertionError):
    """Send-queue completions left posting order; carries both orders for the defect
    catalogue (defects.py), which tells a known overtaking pattern from any other."""

    def __init__(self, posted: list[tuple[str, int]], completed: list[tuple[str, int]]) -> None:
        super().__init__(
            "send-queue completions out of posting order: "
            + ", ".join(f"{op}#{i}" for op, i in completed)
            + " (posted: "
            + ", ".join(f"{op}#{i}" for op, i in posted)
            + ")"
        )
        self.posted, self.completed = posted, completed


def expect_posting_order(wcs: list[dict[str, Any]], wrs: list[dict[str, Any]]) -> None:
    """RC completions of one send queue arrive in posting order (IB spec 10.8.3)."""
    posted = [
        (str(w.get("opcode", "SEND")), int(w.get("wr_id", 0)))
        for w in wrs
        if w.get("signaled", True)
    ]
    completed = [(str(c["opcode"]), int(c["wr_id"])) for c in wcs]
    if completed != posted:
        raise CompletionOrderError(posted, completed)
