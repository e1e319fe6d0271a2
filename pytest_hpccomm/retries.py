"""The suite's retries: each for one named transient cause that the code detects by its
signature, bounded by its caller, and counted here. The session's count per cause goes to the
terminal summary, the markdown summary, the results JSON and JUnit's global properties, so a
run that needed retries says how many and why.

Nothing else is ever tried again: a test never retries a failure of the thing it checks (a
hang, a wrong answer, a regression), and no check is repeated until it passes.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass

CONTENTION = "cores shared"
HOST_MOVED = "host speed moved between sessions"
SESSION_SHARED = "gate session on shared cores"

# cause -> how the code detects it, and why it is transient (not the stack's answer)
CAUSES: dict[str, str] = {
    CONTENTION: "the contention guard measured another process on the job's cores "
    "(proc/cpu_share.py): the timing measured that process too; the job runs "
    "again, at most twice, and not at all while the cores stay busy",
    HOST_MOVED: "a stored-gate test's clean session, run right after its canary session, "
    "read the host farther from the baseline session than the canary's known answer "
    "survives (this VM type's MPI and gRPC jobs move between speed phases lasting "
    "minutes): the canary's ratio is not a known answer in that run, so the test's "
    "sessions run once more in a fresh directory, at most twice "
    "(tests/integration/_paired.py)",
    SESSION_SHARED: "a gate test's session judged a point on shared cores (its verdict gives "
    "the contention guard's reason) after the guard's own retries, so the canary's ratio "
    "is not a known answer in it: the test waits for a quiet window on the cores (at most "
    "a minute) and runs its sessions once more in a fresh directory, at most twice; shared "
    "again by the hypervisor's steal alone, the test checks that the gate said INCONCLUSIVE "
    "naming it and skips: no quiet cores on this machine (tests/integration/_paired.py)",
}


@dataclass(frozen=True)
class Retry:
    """One retry: its cause, the test it happened in (pytest's PYTEST_CURRENT_TEST) and the
    detecting code's reason (for the contention guard, which processes shared the cores)."""

    cause: str
    test: str
    reason: str

    def line(self) -> str:
        return f"{self.cause}: {self.test or '(outside a test)'}: {self.reason or '?'}"


_ledger: list[Retry] = []


def count(cause: str, n: int = 1, reason: str = "") -> None:
    """One more retry (or `n`) for `cause`, which must be one of CAUSES; `reason` is what the
    code saw (it reaches the terminal summary, so a CI log says who shared the cores)."""
    if cause not in CAUSES:
        raise ValueError(f"retry for an unnamed cause {cause!r}: only {sorted(CAUSES)} retry")
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    _ledger.extend([Retry(cause, test, " ".join(reason.split()))] * max(n, 0))


def mark() -> int:
    """The ledger's position now: a session counts from its mark (a session run inside
    another, as pytester's are, adds to both)."""
    return len(_ledger)


def since(mark_: int = 0) -> list[Retry]:
    """The retries from a mark() on, in order."""
    return _ledger[mark_:]


def counts(mark_: int = 0) -> dict[str, int]:
    """Retries per cause, all or since a mark(); causes without one are left out."""
    return dict(sorted(Counter(r.cause for r in since(mark_)).items()))


def summary_line(got: dict[str, int] | None = None) -> str:
    """'retries: none' or 'retries: 3 (cores shared 2, host speed moved between sessions 1)'."""
    got = counts() if got is None else got
    total = sum(got.values())
    if not total:
        return "retries: none"
    return f"retries: {total} (" + ", ".join(f"{c} {n}" for c, n in got.items()) + ")"


def detail_lines(got: list[Retry], most: int = 30) -> list[str]:
    """One line per retry (the first `most`, then how many more), for the terminal summary."""
    lines = [r.line() for r in got[:most]]
    if len(got) > most:
        lines.append(f"... and {len(got) - most} more")
    return lines


def property_name(cause: str) -> str:
    """JUnit property name for a cause: hpccomm_retries_cores_shared."""
    return "hpccomm_retries_" + re.sub(r"[^a-z0-9]+", "_", cause.lower()).strip("_")
