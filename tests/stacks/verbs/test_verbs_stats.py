"""perftest's statistics: known answers worked out by hand from print_report_lat/_bw."""

from __future__ import annotations

import math

import pytest

from pytest_hpccomm.stacks.verbs.stats import (
    bandwidth_mb_s,
    deltas,
    latency_stats,
    message_rate_mpps,
)


def test_deltas_are_consecutive_post_gaps_over_the_rtt_factor() -> None:
    assert deltas([0, 4000, 10000], rtt_factor=2) == [2.0, 3.0]
    assert deltas([0, 4000, 10000], rtt_factor=1) == [4.0, 6.0]


def test_latency_stats_drop_the_two_slowest_and_take_the_median() -> None:
    # 10 iterations 1..10 µs: cnt = 8 after the tail, kept = 1..8
    s = latency_stats([float(x) for x in range(10, 0, -1)])
    assert s.iterations == 10
    assert s.t_min == 1.0
    assert s.t_max == 9.0  # perftest prints delta[cnt], the first dropped value
    assert s.t_typical == 4.5  # even count: mean of delta[3] and delta[4]
    assert s.t_avg == pytest.approx(4.5)
    assert s.t_p99 == 9.0  # delta[ceil(8 * 0.99)] = delta[8]
    assert s.t_p999 == 9.0
    assert s.t_stdev == pytest.approx(math.sqrt(sum((4.5 - d) ** 2 for d in range(1, 9)) / 8))


def test_latency_median_of_an_odd_count() -> None:
    s = latency_stats([1.0, 2.0, 3.0, 100.0, 200.0])  # cnt = 3: kept 1, 2, 3
    assert s.t_typical == 2.0
    assert s.t_avg == 2.0


def test_latency_needs_more_than_the_tail() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        latency_stats([1.0, 2.0])


def test_bandwidth_is_in_mebibytes_and_rate_in_millions() -> None:
    # 1000 x 1 MiB in one second: 1000 MB/sec in perftest's units, 0.001 Mpps
    assert bandwidth_mb_s(1 << 20, 1000, 1_000_000_000) == pytest.approx(1000.0)
    assert message_rate_mpps(1000, 1_000_000_000) == pytest.approx(0.001)
    with pytest.raises(ValueError):
        bandwidth_mb_s(1, 1, 0)
