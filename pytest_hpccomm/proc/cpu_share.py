"""Who used the cores while a job ran: this process tree, or someone else.

A benchmark's samples cannot tell a slower stack from a neighbour that took the cores (another
pytest, a browser, a build on a shared CI runner); the machine's own accounting can. Over a
job's lifetime:

More: docs/explanation/internals.md (pytest_hpccomm.proc.cpu_share).
"""

from __future__ import annotations

import dataclasses
import glob
import os
import resource
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Protocol, TypeVar, cast

from pytest_hpccomm import retries
from pytest_hpccomm.proc import proctree

# Other processes may use this much on average while a job measures (cluster daemons, a shell);
# more, and the job's timings are not its own: MPI ranks that busy-poll lose whole time slices.
QUIET_CORES = 0.1
QUIET_FRACTION = 0.02  # of the machine, on wide nodes
_TICK = float(os.sysconf("SC_CLK_TCK"))
_BUSY_FIELDS = (0, 1, 2, 7)  # user nice system steal (not idle, iowait, irq, softirq)
_STEAL = 7


def quiet_limit(cpus: int) -> float:
    """The foreign cores a job on `cpus` cores may see and still count as quiet."""
    return max(QUIET_CORES, QUIET_FRACTION * cpus)


def _machine() -> tuple[float, float, int | None]:
    """(busy, steal) seconds of all CPUs since boot, and the run queue (procs_running), from
    one read of /proc/stat."""
    with open("/proc/stat", "rb") as f:
        lines = f.read().splitlines()
    first = lines[0].split()  # "cpu  user nice system idle iowait irq softirq steal ..."
    ticks = [int(x) for x in first[1:]]
    busy = sum(ticks[i] for i in _BUSY_FIELDS if i < len(ticks))
    steal = ticks[_STEAL] if len(ticks) > _STEAL else 0
    queue = next(
        (int(line.split()[1]) for line in lines if line.startswith(b"procs_running ")), None
    )
    return busy / _TICK, steal / _TICK, queue


def _load1() -> float | None:
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _mhz() -> float | None:
    """Mean CPU clock in MHz: cpufreq's current frequency where the kernel exposes it (not in
    most VMs), else /proc/cpuinfo's "cpu MHz" lines; None when neither is there."""
    khz = []
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq"):
        try:
            with open(path) as f:
                khz.append(int(f.read()))
        except (OSError, ValueError):
            continue
    if khz:
        return sum(khz) / len(khz) / 1000.0
    try:
        with open("/proc/cpuinfo") as f:
            mhz = [float(line.split(":")[1]) for line in f if line.startswith("cpu MHz")]
    except (OSError, ValueError, IndexError):
        return None
    return sum(mhz) / len(mhz) if mhz else None


def _own(rows: Mapping[proctree.Proc, proctree.Row]) -> float:
    """CPU seconds of this process tree: self, reaped children, live descendants (in `rows`,
    a proctree.table())."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    live = sum(rows[p].cpu_ticks for p in _tree(rows))
    return total + live / _TICK


def _tree(rows: Mapping[proctree.Proc, proctree.Row]) -> set[proctree.Proc]:
    """This process's descendants in `rows`, zombies too: a sibling job that ended but is
    reaped after this one (parallel workers, finished in order) is no longer live and not yet
    our children's: its time would count as a neighbour's."""
    return proctree.descendants([os.getpid()], zombies=True, rows=rows)


@dataclass(frozen=True)
class CpuShare:
    """Average use of the machine's cores over `wall` seconds."""

    wall: float
    cpus: int
    busy_cores: float
    own_cores: float
    steal_cores: float
    load1: float | None = None  # 1-minute load average as the job ended
    run_queue: tuple[int | None, int | None] = (None, None)  # procs_running at start, end
    mhz: float | None = None  # mean CPU clock as the job ended, where visible
    # who else used the cores, when they were shared: "PID command" and its cores, busiest
    # first (processes still there at the end; one that ended in between is not seen)
    others: tuple[tuple[str, float], ...] = ()

    @property
    def foreign_cores(self) -> float:
        """Cores used by anyone but this process tree (never below 0: accounting granularity)."""
        return max(0.0, self.busy_cores - self.own_cores)

    @property
    def quiet_limit(self) -> float:
        return quiet_limit(self.cpus)

    @property
    def disturbed(self) -> str:
        """Why this job's timings are suspect ("" when the cores were ours)."""
        if self.foreign_cores <= self.quiet_limit:
            return ""
        return f"cores shared: {self.describe()} (quiet: <= {self.quiet_limit:.2f})"

    def describe(self) -> str:
        steal = (
            f", {self.steal_cores:.2f} stolen by the hypervisor" if self.steal_cores >= 0.01 else ""
        )
        load = f", load average {self.load1:.2f}" if self.load1 is not None else ""
        start, end = self.run_queue
        queue = "" if start is None or end is None else f", {max(start, end)} runnable"
        busiest = (
            "; busiest: " + ", ".join(f"{who} ({cores:.2f})" for who, cores in self.others)
            if self.others
            else ""
        )
        return (
            f"other processes used {self.foreign_cores:.2f} of {self.cpus} cores "
            f"over {self.wall:.1f} s{steal}{load}{queue}{busiest}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "wall_s": round(self.wall, 3),
            "cpus": self.cpus,
            "busy_cores": round(self.busy_cores, 3),
            "own_cores": round(self.own_cores, 3),
            "foreign_cores": round(self.foreign_cores, 3),
            "steal_cores": round(self.steal_cores, 3),
            "load1": self.load1,
            "run_queue": list(self.run_queue),
            "mhz": None if self.mhz is None else round(self.mhz, 1),
            "others": [[who, round(cores, 3)] for who, cores in self.others],
        }


class CpuMeter:
    """Snapshot at construction; stop() returns the share since then."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()
        self._busy0, self._steal0, self._queue0 = _machine()
        self._rows0 = proctree.table()  # one pass: our tree's time, and everyone's
        self._own0 = _own(self._rows0)

    def stop(self, extra_own: float = 0.0) -> CpuShare:
        """extra_own: CPU seconds of the job's processes outside this process tree (srun's
        tasks on this node, outside_cpu.py), ours as well."""
        wall = max(time.monotonic() - self._t0, 1e-6)
        busy, steal, queue = _machine()
        rows = proctree.table()
        own = _own(rows)
        share = CpuShare(
            wall=wall,
            cpus=os.cpu_count() or 1,
            busy_cores=(busy - self._busy0) / wall,
            own_cores=max(0.0, own - self._own0 + extra_own) / wall,
            steal_cores=(steal - self._steal0) / wall,
            load1=_load1(),
            run_queue=(self._queue0, queue),
            mhz=_mhz(),
        )
        if share.disturbed:  # name them, from the same two tables
            share = dataclasses.replace(share, others=self._busiest(wall, rows))
        return share

    def _busiest(
        self,
        wall: float,
        rows: Mapping[proctree.Proc, proctree.Row],
        top: int = 3,
        least: float = 0.05,
    ) -> tuple[tuple[str, float], ...]:
        """The processes outside this tree that used the most CPU since the snapshot (one
        started since then counts whole), at least `least` cores each."""
        mine = {p.pid for p in _tree(rows)} | {os.getpid()}
        used = [
            (row.self_ticks - (self._rows0[p].self_ticks if p in self._rows0 else 0), p)
            for p, row in rows.items()
            if p.pid not in mine
        ]
        used.sort(reverse=True)
        out = []
        for ticks, p in used[:top]:
            cores = ticks / _TICK / wall
            if cores < least:
                break
            out.append((f"{p.pid} {proctree.name(p.pid)[:80]}", cores))
        return tuple(out)


@dataclass(frozen=True)
class JobsCpu:
    """The readings of the jobs behind one measurement, as a Sweep keeps them: each job's
    share (CpuShare.to_json) and why the first disturbed job's timings are not its own."""

    shares: tuple[dict[str, float], ...] = ()
    disturbed: str = ""


def of_jobs(shares: Iterable[CpuShare | None]) -> JobsCpu:
    """JobsCpu of jobs in order; a job without a reading (None) is left out."""
    got = [s for s in shares if s is not None]
    return JobsCpu(
        tuple(s.to_json() for s in got), next((s.disturbed for s in got if s.disturbed), "")
    )


class Guarded(Protocol):
    """A sweep the contention guard watched: each job's share, why its timings are not its own
    ("" when the cores were its own), and how many jobs ran again."""

    @property
    def cpu(self) -> Sequence[Mapping[str, float]]: ...
    @property
    def disturbed(self) -> str: ...
    @property
    def reruns(self) -> int: ...


def pooled(sweeps: Sequence[Guarded]) -> tuple[tuple[dict[str, float], ...], str, int]:
    """Pooled jobs' readings in job order, the first disturbed job's reason, the reruns."""
    return (
        tuple(dict(c) for s in sweeps for c in s.cpu),
        next((s.disturbed for s in sweeps if s.disturbed), ""),
        sum(s.reruns for s in sweeps),
    )


def evidence_extra(sweep: Guarded) -> dict[str, Any]:
    """{"cpu": evidence(...)} for a record's extra, {} when no job was measured."""
    return {"cpu": evidence(sweep.cpu, sweep.disturbed, sweep.reruns)} if sweep.cpu else {}


def evidence(shares: Sequence[Mapping[str, float]], disturbed: str, reruns: int) -> dict[str, Any]:
    """What a measurement's `extra["cpu"]` records of its jobs (baselines/store.shared_cores
    reads the `disturbed` reason back)."""
    return {
        "foreign_cores": [s["foreign_cores"] for s in shares],
        "disturbed": disturbed,
        "reruns": reruns,
        "load1": [s.get("load1") for s in shares],
        "run_queue": [s.get("run_queue") for s in shares],
        "mhz": [s.get("mhz") for s in shares],
        "others": [s.get("others") or [] for s in shares],
    }


T = TypeVar("T")
G = TypeVar("G", bound="Guarded")


class QuietRetry:
    """Runs a job again while another process shared the cores, as long as that looks
    transient: up to `reruns` extra tries per job, and none at all once `streak` tries in a
    row were disturbed (a runner that is loaded for good would only triple the suite's time;
    each later job still gets one try, and the first quiet one re-arms the retries)."""

    def __init__(self, reruns: int = 2, streak: int = 3) -> None:
        self.reruns, self.streak = reruns, streak
        self._disturbed_in_a_row = 0
        self.extra_runs = 0  # what the guard cost this session, in jobs

    def guarded(self, job: Callable[[], G]) -> G:
        """job() run again while its result says it was disturbed; the kept result with
        `reruns` set to how many extra tries it took (a frozen dataclass: a copy)."""
        got, reruns = self.run(job, lambda s: s.disturbed)
        try:
            setattr(got, "reruns", reruns)  # noqa: B010 (the very object: others may hold it)
        except dataclasses.FrozenInstanceError:
            return cast(G, dataclasses.replace(cast(Any, got), reruns=reruns))
        return got

    def run(self, job: Callable[[], T], disturbed: Callable[[T], str]) -> tuple[T, int]:
        """(the last try's result, how many extra tries it took)."""
        attempt = 0
        while True:
            got = job()
            why = disturbed(got)
            if not why:
                self._disturbed_in_a_row = 0
                return got, attempt
            self._disturbed_in_a_row += 1
            if attempt >= self.reruns or self._disturbed_in_a_row >= self.streak:
                return got, attempt
            attempt += 1
            self.extra_runs += 1
            retries.count(retries.CONTENTION, reason=why)
