"""What the release matrix needs to know of a stack: its implementation option, its suites,
its perf selection for the A/B pairs, how to check, list and order its releases.

A stack offers one as `AXIS` in its `releases.py` (the same role name in every stack that has
one); `axis_for` finds it by that name, so the core imports no stack.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass
from typing import Callable, Sequence

STACKS = "pytest_hpccomm.stacks"


@dataclass(frozen=True)
class ReleaseAxis:
    stack: str  # the stack's name, and its key in --hpc-base/--hpc-candidate
    option: str  # the pytest option naming one implementation: "--hpc-mpi"
    conformance: tuple[str, ...]  # pytest arguments selecting the conformance items
    perf: tuple[str, ...]  # pytest arguments selecting the A/B pair's benchmarks
    spec_error: Callable[[str], str | None]  # why a name cannot be a release (a usage error)
    all_releases: Callable[[], list[str]]  # every release the registries have, in order
    line: Callable[[str], str]  # releases of one line are compared pairwise (a vendor)
    order: Callable[[str], tuple[object, ...]]  # sort key within a line (its version)
    describe: Callable[[str], str]  # what a name is, exactly ("Open MPI 5.0.8")
    prepare: Callable[[str], None] = lambda spec: None  # make what ordering needs to know


def axis_names() -> list[str]:
    """The stacks with a release axis (a `releases` module), found by name: the core imports
    no stack."""
    spec = importlib.util.find_spec(STACKS)
    where = list(spec.submodule_search_locations or []) if spec else []
    return sorted(
        m.name
        for m in pkgutil.iter_modules(where)
        if m.ispkg and importlib.util.find_spec(f"{STACKS}.{m.name}.releases")
    )


def axis_for(stack: str) -> ReleaseAxis:
    names = axis_names()
    if stack not in names:
        raise ValueError(
            f"no release axis for {stack!r}: the stacks with one are {', '.join(names)}"
        )
    axis = importlib.import_module(f"{STACKS}.{stack}.releases").AXIS
    assert isinstance(axis, ReleaseAxis)
    return axis


def ordered(axis: ReleaseAxis, releases: Sequence[str]) -> list[str]:
    """Releases grouped by line (in the order lines first appear), each line by version."""
    lines: dict[str, list[str]] = {}
    for r in releases:
        lines.setdefault(axis.line(r), []).append(r)
    return [r for group in lines.values() for r in sorted(group, key=axis.order)]


def adjacent_pairs(axis: ReleaseAxis, releases: Sequence[str]) -> list[tuple[str, str]]:
    """(older, newer) for each two neighbours of one line in `ordered` releases."""
    rs = ordered(axis, releases)
    return [(a, b) for a, b in zip(rs, rs[1:]) if axis.line(a) == axis.line(b)]
