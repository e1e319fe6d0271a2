"""How fast this host runs a fixed, stack-independent workload: the reference probe.

Two VMs of one machine type (same CPU model string, cores, kernel) need not run at one speed,
and a set recorded on a faster one claims regressions with no code changed
(docs/explanation/host-probe.md). The fingerprint cannot see this; a probe can. Each component times what
the stacks spend their time on: interpreted Python (TF, Horovod and mpi4py drive their work
from Python), C-level ALU work (hashing), memory bandwidth (MPI's shared-memory and TCP
copies) and a cross-process wake-up (every small message's round trip).
"""

from __future__ import annotations

import hashlib
import math
import mmap
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

# each a rate, higher = faster
COMPONENTS = ("python", "hash", "copy", "wake")
UNITS = {"python": "Mloop/s", "hash": "MB/s", "copy": "GB/s", "wake": "kRTT/s"}
# the probe's method: 2 since the wake-up runs across two pinned CPUs (1 left it to the
# scheduler); readings of different methods are not compared (baselines/host_probes.py)
METHOD = 2
ROUNDS = 5  # rounds of every component, interleaved: a burst of noise hits one round of each
# each timed run follows an untimed one: a vCPU that just sat in the wake-up test's waits
# runs the next ~50 ms at a third of its speed (hashing 300 vs 1,000 MB/s here)
_ECHO = (
    "import os,sys\nr,w,cpu=map(int,sys.argv[1:4])\nos.sched_setaffinity(0,{cpu})\n"
    "while True:\n b=os.read(r,1)\n if not b: break\n os.write(w,b)\n"
)


@dataclass(frozen=True)
class HostSpeed:
    """Median rate of each component (COMPONENTS, UNITS), and why the reading is not this
    host's alone ("": the cores were the probe's; else the contention guard's reason);
    `rounds`: each component's rates, round by round (what own_noise reads; not stored)."""

    rates: Mapping[str, float]
    disturbed: str = field(default="", compare=False)
    rounds: Mapping[str, tuple[float, ...]] = field(default_factory=dict, compare=False)

    def to_json(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in self.rates.items()}

    @classmethod
    def from_json(cls, data: object) -> HostSpeed:
        if not isinstance(data, Mapping) or not data:
            raise ValueError(f"a host probe is an object of rates, not {data!r}")
        rates = {str(k): float(v) for k, v in data.items()}
        if not all(math.isfinite(v) and v > 0 for v in rates.values()):
            raise ValueError(f"a host probe's rates must be positive numbers: {rates}")
        return cls(rates)


def speed_ratio(now: HostSpeed, then: HostSpeed) -> tuple[float, dict[str, float]]:
    """(geometric mean over the shared components of now/then, each component's ratio):
    above 1, this host is faster than the one `then` was probed on."""
    ratios = {k: now.rates[k] / then.rates[k] for k in now.rates if k in then.rates}
    if not ratios:
        return 1.0, {}
    return math.exp(statistics.fmean(math.log(r) for r in ratios.values())), ratios


def own_noise(reading: HostSpeed) -> float | None:
    """The probe's own noise, from one reading's rounds: the standard error of log(speed_ratio)
    between two readings of an unchanged host. A component's median of n rounds has standard
    error 1.2533 s/sqrt(n) (the median's, normal case), s its rounds' spread of log rates,
    taken robustly (1.4826 x their median absolute deviation: a burst that slows one round
    moves the median little); speed_ratio averages the components' logs (divide by their
    count) and compares two readings (times sqrt 2). None without two rounds of every
    component. A reading lasts about a second, shorter than the steps a VM's rates move in,
    so this is the probe's noise and not the host's."""
    rounds = list(reading.rounds.values())
    if not rounds or any(len(r) < 2 or min(r) <= 0 for r in rounds):
        return None
    se = []
    for r in rounds:
        logs = [math.log(x) for x in r]
        mid = statistics.median(logs)
        spread = 1.4826 * statistics.median(abs(x - mid) for x in logs)
        se.append(1.2533 * spread / math.sqrt(len(logs)))
    return math.sqrt(2.0) * math.sqrt(sum(e * e for e in se)) / len(se)


def typical(probes: list[HostSpeed]) -> HostSpeed:
    """Component-wise median of several sessions' probes."""
    keys = [k for k in probes[0].rates if all(k in p.rates for p in probes)] if probes else []
    return HostSpeed({k: statistics.median(p.rates[k] for p in probes) for k in keys})


def _python_loop() -> float:
    n, t0 = 500_000, time.perf_counter()
    s = 0
    for i in range(n):
        s += i & 7
    return n / (time.perf_counter() - t0) / 1e6


def _hash(block: bytes = b"\x5a" * (8 << 20)) -> float:
    t0 = time.perf_counter()
    hashlib.sha256(block).digest()
    return len(block) / (time.perf_counter() - t0) / 1e6


def _small_pages(n: int) -> np.ndarray:
    """n zero bytes in base pages whatever transparent huge pages would do: numpy asks for
    huge pages for large arrays, the kernel grants them or not per allocation, and a copy's
    rate then depends on which it got (explanation: docs/explanation/host-probe.md)."""
    buf = mmap.mmap(-1, n)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        buf.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(buf, dtype=np.uint8)


def _copier() -> Callable[[], float]:
    src, dst = _small_pages(32 << 20), _small_pages(32 << 20)
    src[:] = 1
    np.copyto(dst, src)  # fault its pages in: the first copy times the kernel, not memory

    def copy() -> float:
        t0 = time.perf_counter()
        np.copyto(dst, src)
        return src.nbytes / (time.perf_counter() - t0) / 1e9

    return copy


def _cpus() -> tuple[int, int]:
    """(the probe's CPU, its echo child's): two distinct CPUs where there are two. Left to
    the scheduler, the child lands on the probe's own CPU whenever the other is busy, and a
    round trip is then a context switch, far faster than the wake-up across cores, and a
    loaded host reads as a fast one (docs/explanation/host-probe.md)."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[0], cpus[1] if len(cpus) > 1 else cpus[0]


def _waker(child_cpu: int, trips: int = 1000) -> tuple[Callable[[], float], Callable[[], None]]:
    """1-byte round trips through pipes to a child process pinned to `child_cpu`: the
    wake-up across cores a small message costs; the child is ours, reaped by `close`."""
    child_reads, to_child = os.pipe()
    from_child, child_writes = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-S", "-c", _ECHO, str(child_reads), str(child_writes), str(child_cpu)],
        pass_fds=(child_reads, child_writes),
    )
    os.close(child_reads)
    os.close(child_writes)

    def wake() -> float:
        t0 = time.perf_counter()
        for _ in range(trips):
            os.write(to_child, b"x")
            if os.read(from_child, 1) != b"x":
                raise OSError("the probe's echo child answered wrongly")
        return trips / (time.perf_counter() - t0) / 1e3

    def close() -> None:
        os.close(to_child)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        finally:
            os.close(from_child)

    return wake, close


def probe(rounds: int = ROUNDS) -> HostSpeed:
    """The median of `rounds` interleaved rounds of every component (~1 s here), this
    thread pinned to one CPU and the echo child to another (_cpus) for the probe's length."""
    from pytest_hpccomm.proc.cpu_share import CpuMeter

    own = os.sched_getaffinity(0)
    mine, childs = _cpus()
    meter = CpuMeter()  # the echo child is ours: only another process's use counts
    wake, close = _waker(childs)  # the child pins itself
    try:
        os.sched_setaffinity(0, {mine})  # inside: the thread gets its CPUs back whatever fails
        steps: dict[str, Callable[[], float]] = {
            "python": _python_loop,
            "hash": _hash,
            "copy": _copier(),
            "wake": wake,
        }
        wake()  # the child's start-up is no round trip
        got: dict[str, list[float]] = {k: [] for k in steps}
        for _ in range(rounds):
            for k, step in steps.items():
                step()
                got[k].append(step())
    finally:
        close()
        os.sched_setaffinity(0, own)
    return HostSpeed(
        {k: statistics.median(v) for k, v in got.items()},
        meter.stop().disturbed,
        {k: tuple(v) for k, v in got.items()},
    )


def quiet_probe() -> HostSpeed:
    """probe() taken again while another process shared the cores (the contention guard's
    bounded, counted re-runs: proc/cpu_share.QuietRetry); the last reading says whether it
    stayed disturbed. A neighbour's burst during the probe would read as a slower host."""
    from pytest_hpccomm.proc.cpu_share import QuietRetry

    reading, _ = QuietRetry().run(probe, lambda s: s.disturbed)
    return reading


def main(argv: list[str] | None = None) -> int:
    """`hpccomm probe`: this host's reference-probe rates, one line."""
    import sys

    if list(sys.argv[1:] if argv is None else argv):
        print("usage: hpccomm probe", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    speed = quiet_probe()
    print(
        " ".join(f"{k} {v:.4g} {UNITS[k]}" for k, v in speed.rates.items()),
        f"({time.monotonic() - t0:.2f} s)" + (f"; {speed.disturbed}" if speed.disturbed else ""),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
