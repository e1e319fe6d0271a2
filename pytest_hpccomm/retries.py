"""The suite's retries: each for one named transient cause that the code detects by its
signature, bounded by its caller, and counted here. The session's count per cause goes to the
terminal summary, the markdown summary, the results JSON and JUnit's global properties, so a
run that needed retries says how many and why.

Nothing else is ever tried again: a test never retries a failure of the thing it checks (a
hang, a wrong answer, a regression), and no check is repeated until it passes.
"""

from __future__ import annotations

import re
from collections import Counter

CONTENTION = "cores shared"
MPICH_INIT = "MPICH MPI_Init ep_enable"

# cause -> how the code detects it, and why it is transient (not the stack's answer)
CAUSES: dict[str, str] = {
    CONTENTION: "the contention guard measured another process on the job's cores "
    "(cluster/cpu_share.py): the timing measured that process too; the job runs "
    "again, at most twice, and not at all while the cores stay busy",
    MPICH_INIT: "MPICH's MPI_Init failed in libfabric's TCP endpoint setup ('OFI call "
    "ep_enable failed') before any communication; the launch is repeated, at most "
    "3 launches (cluster/launchers/mpirun.py)",
}

_counts: Counter[str] = Counter()


def count(cause: str, n: int = 1) -> None:
    """One more retry (or `n`) for `cause`, which must be one of CAUSES."""
    if cause not in CAUSES:
        raise ValueError(f"retry for an unnamed cause {cause!r}: only {sorted(CAUSES)} retry")
    if n > 0:
        _counts[cause] += n


def mark() -> dict[str, int]:
    """The counts so far: a session counts from its mark (a session run inside another, as
    pytester's are, adds to both)."""
    return dict(_counts)


def counts(since: dict[str, int] | None = None) -> dict[str, int]:
    """Retries per cause, all or since a mark(); causes without one are left out."""
    since = since or {}
    return {c: n - since.get(c, 0) for c, n in sorted(_counts.items()) if n > since.get(c, 0)}


def summary_line(got: dict[str, int] | None = None) -> str:
    """'retries: none' or 'retries: 3 (cores shared 2, perftest connect refused 1)'."""
    got = counts() if got is None else got
    total = sum(got.values())
    if not total:
        return "retries: none"
    return f"retries: {total} (" + ", ".join(f"{c} {n}" for c, n in got.items()) + ")"


def property_name(cause: str) -> str:
    """JUnit property name for a cause: hpccomm_retries_cores_shared."""
    return "hpccomm_retries_" + re.sub(r"[^a-z0-9]+", "_", cause.lower()).strip("_")
