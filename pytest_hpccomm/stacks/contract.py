"""The stack contract: what a stack plugin gives the core, and what it gets back.

A stack provides an `Implementations` resolver (a spec resolved once: absent and not asked
for -> skip; absent but named as a paired run's side, or broken -> fail naming it), a session
store of sweeps over `measure.pooling.JobPool` (get, more, paired rounds; the canary applied by
the candidate's store only) and `records(sweep)`. It gets, from `judge_point`, adaptive repeats,
paired A/B verdicts and the JUnit and report rows of `hpc_record`:

    judge_point(hpc_record, Point(get=..., more=..., cost=..., paired=None or ...),
                records, failures=(SweepFailed,))

A whole toy stack on this module alone: tests/contract/toy_stack.py. Why and how to add a stack:
docs/explanation/architecture.md ("The stack contract").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest

from pytest_hpccomm.cache import python_in
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.record import PooledSweep, Record
from pytest_hpccomm.session import HpcSession, hpc_session_of

E = TypeVar("E")
P = TypeVar("P", bound=PooledSweep)

BASE_FLAG, CANDIDATE_FLAG = "--hpc-base", "--hpc-candidate"


class Implementations(Generic[E]):
    """spec -> E, resolved once per process (`resolve(spec)`); what it raised is kept too, so
    every item of an implementation that failed to resolve reports the same reason without
    resolving again."""

    def __init__(
        self,
        resolve: Callable[[str], E],
        unavailable: tuple[type[Exception], ...],
        broken: tuple[type[Exception], ...],
    ) -> None:
        self.resolve, self.unavailable, self.broken = resolve, unavailable, broken
        self._got: dict[str, E | Exception] = {}

    def __call__(self, spec: str, named_by: str | None = None) -> E:
        """The implementation; `named_by`: the option that named it as a side of a paired run
        (an absent side then fails the item: the user asked for it)."""
        if spec not in self._got:
            try:
                self._got[spec] = self.resolve(spec)
            except self.unavailable + self.broken as exc:
                self._got[spec] = exc
        got = self._got[spec]
        if isinstance(got, self.unavailable):
            if named_by is None:
                pytest.skip(str(got))
            pytest.fail(f"{named_by}: {got}", pytrace=False)
        if isinstance(got, Exception):
            pytest.fail(str(got), pytrace=False)
        return got

    def under_test(self, hpc_session: HpcSession, stack: str, spec: str) -> E:
        """What the items test: `spec` (the stack's own option), or a paired run's candidate."""
        paired = sides(hpc_session, stack)
        return self(spec) if paired is None else self(paired[1], f"{CANDIDATE_FLAG} {stack}")

    def base(self, hpc_session: HpcSession, stack: str) -> E | None:
        """A paired run's base side (None: not a paired run of `stack`)."""
        paired = sides(hpc_session, stack)
        return None if paired is None else self(paired[0], f"{BASE_FLAG} {stack}")

    def forget(self) -> None:
        """Resolve every spec again (tests that change what a spec resolves to)."""
        self._got.clear()


def sides(hpc_session: HpcSession, stack: str) -> tuple[str, str] | None:
    """(base, candidate) specs when this session is a paired A/B run of `stack`."""
    return hpc_session.cfg.paired(stack)


def named_in_pair(config: pytest.Config, stack: str) -> bool:
    """Whether --hpc-candidate names `stack` (read from the options, for a stack probe, which
    runs while the session is being opened)."""
    if not config.pluginmanager.has_plugin("hpccomm"):
        return False
    items = config.getoption("hpc_candidate", None) or config.getini("hpc_candidate") or []
    return any(str(item).partition("=")[0].strip() == stack for item in items)


def check_python_specs(
    config: pytest.Config, stack: str, option: str, value: str, what: str, keywords: tuple[str, str]
) -> None:
    """The stack's implementation option, or a paired run's two sides: each a Python (or its
    venv) that has `what`, or one of `keywords` (build, none; `none` is no side). What cannot
    be one is a usage error naming the option; so is the option beside the two sides (a
    third implementation)."""
    build, none = keywords
    specs = [(option, value)]
    paired = (
        sides(hpc_session_of(config), stack) if config.pluginmanager.has_plugin("hpccomm") else None
    )
    if paired is not None:
        if config.getoption(option.lstrip("-").replace("-", "_"), None) is not None:
            raise pytest.UsageError(
                f"{option} cannot be combined with a paired A/B run of {stack}: "
                f"{BASE_FLAG}/{CANDIDATE_FLAG} {stack}=... name the two sides"
            )
        specs = [(f"{BASE_FLAG} {stack}", paired[0]), (f"{CANDIDATE_FLAG} {stack}", paired[1])]
    for flag, python in specs:
        if python == none and flag != option:
            raise pytest.UsageError(
                f"{flag}={none}: each side of a paired run is a {what} to measure"
            )
        if python not in keywords and python_in(python) is None:
            why = "is not a Python executable" if Path(python).exists() else "does not exist"
            raise pytest.UsageError(
                f"{flag}: {python} {why} (a Python with {what}, its venv, `{build}` or `{none}`)"
            )


@dataclass(frozen=True)
class Point(Generic[P]):
    """One benchmark point of a stack's session store: get() the pooled sweep, more() one more
    job (None: no more allowed), cost() what the repeats cost; in a paired A/B run paired()
    gives (candidate, base) sweeps of the same rounds."""

    get: Callable[[], P]
    more: Callable[[], P | None]
    cost: Callable[[], dict[str, Any]]
    paired: Callable[[], tuple[P, P]] | None = None


def judge_point(
    record: Record,
    point: Point[P],
    records: Callable[[P], list[Measurement]],
    failures: tuple[type[Exception], ...],
) -> None:
    """The point judged: against the stored baseline with adaptive repeats (Record.pooled),
    or, in a paired run, every candidate record against the base's record of the same point
    (the base's records are validated as the candidate's are, a failure naming the side)."""
    if point.paired is None:
        record.pooled(point.get, point.more, point.cost, records, failures)
        return
    try:
        candidate, base = point.paired()
    except failures as exc:
        pytest.fail(str(exc), pytrace=False)
    cand_ms = _side("candidate", records, candidate)
    base_ms = _side("base", records, base)
    if [m.key for m in cand_ms] != [m.key for m in base_ms]:
        pytest.fail(
            f"the sides measured different points: candidate {[m.key for m in cand_ms]}, "
            f"base {[m.key for m in base_ms]}",
            pytrace=False,
        )
    record.all(cand_ms, candidate.fingerprint, base_ms)


def _side(name: str, records: Callable[[P], list[Measurement]], sweep: P) -> list[Measurement]:
    try:
        return records(sweep)
    except pytest.fail.Exception as exc:
        pytest.fail(f"{name}: {exc}", pytrace=False)
