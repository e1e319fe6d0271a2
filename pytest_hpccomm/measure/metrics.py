"""The field's units and nccl-tests' bandwidth definitions, for the orchestrator (pure).

- OSU Micro-Benchmarks print MB/s with MB = 10^6 bytes (they divide by 1e6, not 2^20). The
  OSU formulas themselves (half round trip, window bandwidth, osu_mbw_mr over the senders'
  mean time as OSU's calc_bw does) live in the MPI peer, which computes every sample
  (stacks/mpi/peer/__main__.py, osu_ops.py); a peer imports nothing from here.
- nccl-tests, doc/PERFORMANCE.md ("Performance reported by NCCL tests"): algbw = S / t in
  GB/s (10^9 bytes/s) and busbw = algbw * a per-collective correction factor; the MPI driver
  derives them from the OSU collectives' latencies.
"""

from __future__ import annotations

GB = 1e9  # nccl-tests' "GB" in GB/s

UNIT_LATENCY = "us"
UNIT_OSU_BANDWIDTH = "MB/s"
UNIT_MESSAGE_RATE = "msg/s"
UNIT_NCCL_BANDWIDTH = "GB/s"


def _check_positive(**values: float) -> None:
    for name, v in values.items():
        if not v > 0:
            raise ValueError(f"{name} must be > 0, got {v!r}")


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
