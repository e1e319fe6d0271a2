"""The reference probe: this host's rates for real, and the arithmetic that compares hosts."""

from __future__ import annotations

import math
import os

import pytest

from pytest_hpccomm.measure.host_speed import (
    COMPONENTS,
    HostSpeed,
    _cpus,
    _waker,
    probe,
    quiet_probe,
    speed_ratio,
    typical,
)


def test_the_probe_measures_every_component_on_this_host_and_reaps_its_child() -> None:
    before = set(os.listdir("/proc"))
    got = probe(rounds=2)
    assert set(got.rates) == set(COMPONENTS)
    assert all(math.isfinite(v) and v > 0 for v in got.rates.values()), got
    # the echo child is gone (reaped, not a zombie): no new process of ours is left
    left = [
        p
        for p in set(os.listdir("/proc")) - before
        if p.isdigit()
        and os.path.exists(f"/proc/{p}/stat")
        and open(f"/proc/{p}/stat").read().split()[3] == str(os.getpid())
    ]
    assert not left, left


def test_the_wake_up_crosses_cores_whatever_the_scheduler_would_choose() -> None:
    """Left to the scheduler, the echo child shared the probe's CPU whenever the other was
    busy, and the wake component read 25x faster (host_speed._cpus)."""
    own = os.sched_getaffinity(0)
    mine, childs = _cpus()
    assert {mine, childs} <= own
    assert (mine != childs) == (len(own) > 1)
    wake, close = _waker(childs)
    try:
        assert wake() > 0
        kids = open(f"/proc/self/task/{os.getpid()}/children").read().split()
        assert len(kids) == 1
        assert os.sched_getaffinity(int(kids[0])) == {childs}
    finally:
        close()
    probe(rounds=1)
    assert os.sched_getaffinity(0) == own  # the probe gives this thread its CPUs back


def test_speed_ratio_is_the_geometric_mean_over_shared_components() -> None:
    then = HostSpeed({"python": 10.0, "hash": 100.0, "copy": 4.0, "wake": 8.0})
    now = HostSpeed({"python": 5.0, "hash": 50.0, "copy": 4.0, "wake": 8.0})
    ratio, parts = speed_ratio(now, then)
    assert parts == {"python": 0.5, "hash": 0.5, "copy": 1.0, "wake": 1.0}
    assert ratio == pytest.approx(0.5**0.5)
    assert speed_ratio(HostSpeed({"python": 2.0}), HostSpeed({"python": 1.0}))[0] == 2.0
    assert speed_ratio(HostSpeed({"x": 2.0}), HostSpeed({"y": 1.0})) == (1.0, {})


def test_typical_is_the_componentwise_median() -> None:
    got = typical([HostSpeed({"python": v, "wake": 2 * v}) for v in (1.0, 3.0, 2.0)])
    assert got.rates == {"python": 2.0, "wake": 4.0}


@pytest.mark.parametrize(
    "bad", [None, {}, {"python": -1.0}, {"python": "fast"}, {"python": float("nan")}]
)
def test_from_json_refuses_what_is_not_a_probe(bad: object) -> None:
    with pytest.raises(ValueError):
        HostSpeed.from_json(bad)
    assert HostSpeed.from_json({"python": 1}).rates == {"python": 1.0}


def test_the_probe_reads_its_own_quiet_host_within_its_band() -> None:
    """Repeatability: five readings of this host back to back each lie within HOST_BAND of the
    others' median, the band the rule uses to tell another host's speed from the probe's own
    noise. A probe noisier than its band would widen stored verdicts on a host that did not
    change (the band follows from the probe's repeatability: host_probes.HOST_BAND). Each
    reading is the session's (quiet_probe: the contention guard's counted re-runs while another
    process shares the cores); one that stayed disturbed fails with the guard's evidence, since
    then the host was not quiet and the premise does not hold."""
    from pytest_hpccomm.baselines.host_probes import HOST_BAND, describe, within

    readings = [quiet_probe() for _ in range(5)]
    disturbed = [f"reading {i}: {r.disturbed}" for i, r in enumerate(readings) if r.disturbed]
    assert not disturbed, f"the host was not quiet: {disturbed}"
    for i, reading in enumerate(readings):
        others = readings[:i] + readings[i + 1 :]
        assert within(reading, others, HOST_BAND), (
            f"reading {i} of 5: {describe(reading, others)}, outside ±{HOST_BAND:.0%}"
        )


def test_a_neighbour_on_the_cores_marks_the_reading_disturbed() -> None:
    """A busy process outside this process tree on every core while the probe runs: the
    reading says so (the contention guard's reason), so the session neither compares it with
    the set's hosts nor records it into a set."""
    from tests.neighbour import busy_neighbour

    with busy_neighbour(30.0), busy_neighbour(30.0):
        reading = probe()
    assert reading.disturbed.startswith("cores shared: other processes used"), reading
    quiet = HostSpeed(reading.rates)
    assert quiet == reading and not quiet.disturbed  # the reason is no part of the rates
