"""Hypothesis settings for every stack's conformance properties: one rule, one place.

quick profile: derandomized (a merge gate sees the same examples every run: a catch is every
run or never, and rerunning reproduces it), no database; full profile: random, with the
default database (none under Hypothesis' own `ci` profile, which it loads where CI is set).
Always: no deadline (an example is round trips through live peers on shared cores; each stack
bounds its items instead), print_blob for @reproduce_failure, one bug per test (the shrunk one),
and no explain phase: after shrinking it re-runs the test over variations of each part of the
failing example to say which parts did not matter, and with examples drawn from composite
strategies over live peers it ran CPU-bound for minutes in one MPI property while no peer was
called. A stack gives only its example budget and the health checks its properties trip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import HealthCheck, Phase, settings

SLOW = (HealthCheck.too_slow, HealthCheck.data_too_large)
PHASES = tuple(p for p in Phase if p is not Phase.explain)


def property_settings(
    examples: int,
    quick: bool,
    *,
    suppress: Sequence[HealthCheck] = SLOW,
    database: bool = True,
) -> settings:
    """`examples` per property; `database=False` keeps even a full run's failures out of the
    database (a planted-bug run)."""
    kw: dict[str, object] = {}
    if quick or not database:
        kw["database"] = None
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=quick,
        print_blob=True,
        report_multiple_bugs=False,
        phases=PHASES,
        suppress_health_check=list(suppress),
        **kw,  # type: ignore[arg-type]
    )


def register_profile(
    name: str, examples: Mapping[str, int], profile: str, suppress: Sequence[HealthCheck] = SLOW
) -> settings:
    """Register (or re-register) a suite's named Hypothesis profile for --hpc-profile:
    `examples["full"]` on the full profile, else `examples["quick"]`, by the rule above."""
    full = profile == "full"
    s = property_settings(examples["full" if full else "quick"], not full, suppress=suppress)
    settings.register_profile(name, s)
    return s
