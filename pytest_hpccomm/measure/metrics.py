"""The field's metric definitions, so our numbers read like OSU's and nccl-tests' (pure).

Sources (each function cites the line it reproduces):
- OSU Micro-Benchmarks, mpi/pt2pt/osu_latency.c, osu_bw.c, osu_bibw.c and osu_mbw_mr.c.
  OSU prints MB/s with MB = 10^6 bytes (it divides by 1e6, not 2^20).
- nccl-tests, doc/PERFORMANCE.md ("Performance reported by NCCL tests"): algbw = S / t in
  GB/s (10^9 bytes/s) and busbw = algbw * a per-collective correction factor.

Inputs are one timed batch (elapsed wall seconds for `iterations` repetitions); apply these
per batch to get one sample per batch. They also work element-wise on numpy arrays.
"""

from __future__ import annotations

US_PER_S = 1e6
MB = 1e6  # OSU's "MB" in MB/s
GB = 1e9  # nccl-tests' "GB" in GB/s

UNIT_LATENCY = "us"
UNIT_OSU_BANDWIDTH = "MB/s"
UNIT_MESSAGE_RATE = "msg/s"
UNIT_NCCL_BANDWIDTH = "GB/s"


def _check_positive(**values: float) -> None:
    for name, v in values.items():
        if not v > 0:
            raise ValueError(f"{name} must be > 0, got {v!r}")


def osu_latency_us(elapsed_s: float, iterations: int) -> float:
    """One-way latency in µs from a ping-pong loop: half the round trip.

    osu_latency.c: ``latency = (t_end - t_start) * 1e6 / (2.0 * options.iterations)``
    where each iteration is one MPI_Send + one MPI_Recv (a full round trip).
    """
    _check_positive(elapsed_s=elapsed_s, iterations=iterations)
    return elapsed_s * US_PER_S / (2.0 * iterations)


def osu_bandwidth_mb_s(size_bytes: int, window: int, iterations: int, elapsed_s: float) -> float:
    """Uni-directional bandwidth in MB/s (10^6 bytes/s) of a window of non-blocking sends.

    osu_bw.c: each iteration posts `window_size` MPI_Isend of `size` bytes, waits, and gets a
    4-byte ack; ``tmp = size / 1e6 * options.iterations * window_size; bw = tmp / t``.
    """
    _check_positive(window=window, iterations=iterations, elapsed_s=elapsed_s)
    if size_bytes < 0:
        raise ValueError(f"size_bytes must be >= 0, got {size_bytes!r}")
    return size_bytes / MB * iterations * window / elapsed_s


def osu_bibw_mb_s(size_bytes: int, window: int, iterations: int, elapsed_s: float) -> float:
    """Bi-directional bandwidth in MB/s: both peers send a window at once.

    osu_bibw.c: ``tmp = size / 1e6 * options.iterations * window_size * 2; bw = tmp / t``.
    """
    return 2.0 * osu_bandwidth_mb_s(size_bytes, window, iterations, elapsed_s)


def osu_multi_bandwidth_mb_s(
    size_bytes: int, pairs: int, window: int, iterations: int, max_elapsed_s: float
) -> float:
    """Aggregate uni-directional bandwidth of `pairs` sender/receiver pairs in MB/s.

    osu_mbw_mr.c calc_bw(): ``tmp = num_pairs * size / 1e6 * loop * window_size;
    bw = tmp / maxtime`` where maxtime is the slowest sender's time (MPI_Reduce with MPI_MAX).
    """
    _check_positive(pairs=pairs)
    return pairs * osu_bandwidth_mb_s(size_bytes, window, iterations, max_elapsed_s)


def osu_message_rate(pairs: int, window: int, iterations: int, max_elapsed_s: float) -> float:
    """Aggregate message rate in messages/s of `pairs` pairs sending windows of messages.

    osu_mbw_mr.c: ``rate = 1e6 * bw / size`` with bw from calc_bw() above, which reduces to
    ``num_pairs * loop * window_size / maxtime`` (independent of the message size).
    """
    _check_positive(pairs=pairs, window=window, iterations=iterations, max_elapsed_s=max_elapsed_s)
    return pairs * iterations * window / max_elapsed_s


def nccl_algbw_gb_s(size_bytes: int, time_s: float) -> float:
    """nccl-tests' algorithm bandwidth in GB/s (10^9 bytes/s).

    doc/PERFORMANCE.md: "algbw = S/t". S is the operation's size in bytes: for allgather and
    reduce_scatter the *total* array (count per rank * sizeof(type) * n), as nccl-tests uses.
    """
    _check_positive(time_s=time_s)
    if size_bytes < 0:
        raise ValueError(f"size_bytes must be >= 0, got {size_bytes!r}")
    return size_bytes / time_s / GB


def _normalize_collective(name: str) -> str:
    key = name.lower().replace("_", "").replace("-", "").replace(" ", "")
    return key.removesuffix("perf")  # accept binary names such as "all_reduce_perf"


# doc/PERFORMANCE.md, "Summary": correction factor applied to algbw, as a function of ranks n.
# sendrecv: the page notes algbw already "makes sense for point-to-point operations".
_FULL = "full"  # 2(n-1)/n
_PART = "part"  # (n-1)/n
_ONE = "one"  # 1
_BUSBW_KIND = {
    "allreduce": _FULL,
    "allgather": _PART,
    "reducescatter": _PART,
    "alltoall": _PART,
    "gather": _PART,  # nccl-tests src/gather.cu and src/scatter.cu (not on PERFORMANCE.md)
    "scatter": _PART,
    "broadcast": _ONE,
    "bcast": _ONE,
    "reduce": _ONE,
    "sendrecv": _ONE,
}


def busbw_factor(collective: str, nranks: int) -> float:
    """The nccl-tests bus-bandwidth factor for `collective` over `nranks` ranks.

    doc/PERFORMANCE.md: AllReduce 2*(n-1)/n; ReduceScatter, AllGather, AlltoAll (n-1)/n;
    Broadcast, Reduce 1; Gather and Scatter (n-1)/n as their sources compute it. Unknown
    collectives raise ValueError rather than guess a factor.
    """
    kind = _BUSBW_KIND.get(_normalize_collective(collective))
    if kind is None:
        known = ", ".join(sorted(_BUSBW_KIND))
        raise ValueError(f"no busbw factor for collective {collective!r} (known: {known})")
    if nranks < 1:
        raise ValueError(f"nranks must be >= 1, got {nranks!r}")
    if kind == _FULL:
        return 2.0 * (nranks - 1) / nranks
    if kind == _PART:
        return (nranks - 1) / nranks
    return 1.0


def nccl_busbw_gb_s(algbw_gb_s: float, collective: str, nranks: int) -> float:
    """Bus bandwidth in GB/s: ``busbw = algbw * factor`` (doc/PERFORMANCE.md)."""
    return algbw_gb_s * busbw_factor(collective, nranks)
