"""perftest's statistics, reproduced line by line (pure; orchestrator side).

Sources: linux-rdma/perftest src/perftest_parameters.c, print_report_lat() and
print_report_bw() (the same code prints every ib_*_lat / ib_*_bw report):

- latency: per-iteration deltas of consecutive post times (tposted[i+1] - tposted[i]),
  divided by rtt_factor (2 for SEND and RDMA WRITE ping-pongs, 1 for READ and atomics, whose
  completion already is the round trip); sorted; the LAT_MEASURE_TAIL = 2 largest dropped;
  t_min = delta[0], t_max = delta[cnt], t_typical = the median (get_median), t_avg = the mean
  of the kept deltas, t_stdev, and t_99.00 / t_99.90 = delta[ceil(cnt * 0.99)] /
  delta[ceil(cnt * 0.999)], where cnt is the count after dropping the tail.
- bandwidth: BW average = size * iterations / time in MB/sec with MB = 2^20 bytes
  (format_factor 0x100000) and MsgRate = iterations / time in Mpps (10^6 messages/s).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

LAT_MEASURE_TAIL = 2
MB = 0x100000  # perftest's MB/sec is 2^20 bytes/s unless --report_gbits


@dataclass(frozen=True)
class LatencyStats:
    iterations: int
    t_min: float
    t_max: float
    t_typical: float
    t_avg: float
    t_stdev: float
    t_p99: float
    t_p999: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def deltas(times_ns: Sequence[int], rtt_factor: int) -> list[float]:
    """µs per iteration from post times (perftest: delta[i] = tposted[i+1] - tposted[i])."""
    return [(b - a) / 1000.0 / rtt_factor for a, b in zip(times_ns, times_ns[1:])]


def _median(sorted_delta: Sequence[float], n: int) -> float:
    """perftest get_median(n, delta): the mean of the middle two when n is even."""
    if (n - 1) % 2:
        return (sorted_delta[n // 2] + sorted_delta[n // 2 - 1]) / 2
    return sorted_delta[n // 2]


def latency_stats(delta_us: Sequence[float]) -> LatencyStats:
    """perftest's latency report from per-iteration latencies in µs."""
    delta = sorted(delta_us)
    cnt = len(delta) - LAT_MEASURE_TAIL
    if cnt < 1:
        raise ValueError(
            f"latency needs at least {LAT_MEASURE_TAIL + 1} iterations, got {len(delta)}"
        )
    kept = delta[:cnt]
    avg = sum(kept) / cnt
    # perftest truncates each difference to int before squaring (int temp_var): we do not —
    # that is a bug in perftest for sub-µs latencies, and t_stdev is informational only
    stdev = math.sqrt(sum((avg - d) ** 2 for d in kept) / cnt)
    # delta[] still holds the dropped tail, so these indices may reach it, as in perftest
    return LatencyStats(
        iterations=len(delta_us),
        t_min=delta[0],
        t_max=delta[cnt],
        t_typical=_median(delta, cnt),
        t_avg=avg,
        t_stdev=stdev,
        t_p99=delta[min(math.ceil(cnt * 0.99), len(delta) - 1)],
        t_p999=delta[min(math.ceil(cnt * 0.999), len(delta) - 1)],
    )


def bandwidth_mb_s(size: int, iterations: int, elapsed_ns: int) -> float:
    """perftest BW average [MB/sec]: size * iterations / seconds / 2^20."""
    if elapsed_ns <= 0:
        raise ValueError(f"elapsed time must be > 0 ns, got {elapsed_ns}")
    return size * iterations / (elapsed_ns / 1e9) / MB


def message_rate_mpps(iterations: int, elapsed_ns: int) -> float:
    """perftest MsgRate [Mpps]: iterations / seconds / 10^6."""
    if elapsed_ns <= 0:
        raise ValueError(f"elapsed time must be > 0 ns, got {elapsed_ns}")
    return iterations / (elapsed_ns / 1e9) / 1e6
