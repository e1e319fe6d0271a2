"""perftest's benchmark set over the verbs pair (orchestrator side).

Each benchmark is named after the perftest program it reproduces; its peer loop is in
peer/bench.py and its statistics in stats.py. One (benchmark, size) is one peer request per side:
the server side is started first and says when its receives are posted, then the client runs
warm-up + `batches` batches and returns raw times.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_hpccomm.config import HpcConfig
from pytest_hpccomm.measure.measurement import Direction, Measurement
from pytest_hpccomm.proc import cpu_share
from pytest_hpccomm.stacks.contract import SessionStore
from pytest_hpccomm.stacks.verbs.driver import (
    Connection,
    PeerError,
    VerbsCallError,
    VerbsPair,
    together,
)
from pytest_hpccomm.stacks.verbs.stats import (
    LatencyStats,
    bandwidth_mb_s,
    deltas,
    latency_stats,
    message_rate_mpps,
)
from pytest_hpccomm.stacks.verbs.wire import READY

ATOMIC_SIZE = 8


@dataclass(frozen=True)
class Benchmark:
    name: str  # perftest's program, e.g. ib_write_lat
    loop: str  # peer/bench.py loop
    qp_type: str = "RC"
    atomic: str | None = None  # FETCH_AND_ADD | CMP_AND_SWP

    @property
    def latency(self) -> bool:
        return self.loop.endswith("_lat")

    @property
    def rtt_factor(self) -> int:
        """perftest: 2 for SEND / WRITE ping-pongs (half round trip), 1 for READ and atomics."""
        return 2 if self.loop in ("send_lat", "write_lat") else 1

    @property
    def metric(self) -> tuple[str, str, Direction]:
        if self.latency:
            return "latency", "us", Direction.LOWER_IS_BETTER
        return "bandwidth", "MiB/s", Direction.HIGHER_IS_BETTER  # perftest's "MB/sec" is 2^20 B/s

    @property
    def key(self) -> str:
        suffix = f"-{self.qp_type}" if self.qp_type != "RC" else ""
        return f"{self.name}{suffix}" + (f"-{self.atomic}" if self.atomic else "")

    def needs(self, info: dict[str, Any]) -> str | None:
        """Why this device cannot run the benchmark, or None."""
        if self.qp_type == "UD" and info.get("iwarp"):
            return "iWARP has no UD transport"
        if self.atomic and not info.get("atomic_cap"):
            return f"{info.get('device')} has no atomics (device attribute atomic_cap = NONE)"
        return None


BENCHMARKS = (
    Benchmark("ib_send_lat", "send_lat"),
    Benchmark("ib_send_lat", "send_lat", "UD"),
    Benchmark("ib_write_lat", "write_lat"),
    Benchmark("ib_read_lat", "read_lat"),
    Benchmark("ib_atomic_lat", "atomic_lat", atomic="FETCH_AND_ADD"),
    Benchmark("ib_atomic_lat", "atomic_lat", atomic="CMP_AND_SWP"),
    Benchmark("ib_send_bw", "send_bw"),
    Benchmark("ib_send_bw", "send_bw", "UD"),
    Benchmark("ib_write_bw", "write_bw"),
    Benchmark("ib_read_bw", "read_bw"),
    Benchmark("ib_atomic_bw", "atomic_bw", atomic="FETCH_AND_ADD"),
    Benchmark("ib_atomic_bw", "atomic_bw", atomic="CMP_AND_SWP"),
)
BY_KEY = {b.key: b for b in BENCHMARKS}


@dataclass(frozen=True)
class BenchSettings:
    """Iterations per batch, batches and warm-up; large messages get fewer iterations so one
    batch moves at most `batch_bytes`. Emulated devices (rxe, siw) get a functional pass."""

    lat_iterations: int
    bw_iterations: int
    warmup: int
    batches: int
    batch_bytes: int
    depth: int = 64  # perftest's tx_depth is 128; 64 keeps the Python loop's CQ polls short
    limit: float = 120.0  # seconds for one (benchmark, size) on each side
    slowdown: float = 1.0  # the canary's stretch of the client's timed work (peer/bench.py)

    @classmethod
    def for_profile(cls, profile: str, emulated: bool, slowdown: float = 1.0) -> BenchSettings:
        if emulated:
            return cls(
                lat_iterations=16,
                bw_iterations=32,
                warmup=4,
                batches=3,
                batch_bytes=8 << 20,
                limit=120.0,
                slowdown=slowdown,
            )
        if profile == "full":
            return cls(
                lat_iterations=1000,
                bw_iterations=1000,
                warmup=200,
                batches=30,
                batch_bytes=1 << 30,
                slowdown=slowdown,
            )
        return cls(
            lat_iterations=200,
            bw_iterations=256,
            warmup=50,
            batches=20,
            batch_bytes=256 << 20,
            slowdown=slowdown,
        )

    @classmethod
    def for_session(cls, cfg: HpcConfig, emulated: bool) -> BenchSettings:
        """The session's profile; the canary (--hpc-inject-slowdown) reaches the peers' timed
        regions, as in every stack."""
        return cls.for_profile(cfg.profile, emulated, cfg.inject_slowdown)

    def iterations(self, bench: Benchmark, size: int) -> tuple[int, int]:
        """(iterations per batch, warm-up) at this size; at least 4: perftest's statistics
        drop the 2 slowest iterations."""
        base = self.lat_iterations if bench.latency else self.bw_iterations
        n = max(4, min(base, self.batch_bytes // max(size, 1)))
        return n, max(1, min(self.warmup, n))


@dataclass
class BenchPoint:
    bench: Benchmark
    size: int
    iterations: int
    warmup: int
    samples: list[float]  # per batch: typical latency (us) or bandwidth (MB/s)
    stats: dict[str, float] = field(default_factory=dict)  # perftest's report for the point
    # under the canary, per batch: the client's timed regions' ns before and after the stretch
    canary: list[dict[str, int]] = field(default_factory=list)
    job_sizes: list[int] = field(default_factory=list)  # pooled: where each job's batches end
    cpu: tuple[dict[str, float], ...] = ()  # per job: who used the cores (cpu_share.py)
    disturbed: str = ""  # why a job's timings are not its own ("" when the cores were ours)
    reruns: int = 0  # jobs run again because another process shared the cores


def merge(points: Sequence[BenchPoint]) -> BenchPoint:
    """Jobs of one point pooled: batches and canary regions in job order, `job_sizes` marking
    where each job's batches end (the verdict resamples whole jobs); perftest's statistics are
    the first job's."""
    cpu, disturbed, reruns = cpu_share.pooled(points)
    return dataclasses.replace(
        points[0],
        samples=[s for p in points for s in p.samples],
        canary=[c for p in points for c in p.canary],
        job_sizes=[len(p.samples) for p in points],
        cpu=cpu,
        disturbed=disturbed,
        reruns=reruns,
    )


def records(point: BenchPoint) -> list[Measurement]:
    """The point's one record: one sample per batch (typical latency, or bandwidth)."""
    bench = point.bench
    metric, unit, direction = bench.metric
    params: dict[str, Any] = {"size": point.size, "connection": bench.qp_type}
    if bench.atomic:
        params["atomic"] = bench.atomic
    extra: dict[str, Any] = {"iterations_per_sample": point.iterations, **point.stats}
    if len(point.job_sizes) > 1:  # each job's median: baselines.paired.job_medians
        extra["job_sizes"] = point.job_sizes
    extra |= cpu_share.evidence_extra(point)  # shared cores temper the verdict
    return [
        Measurement(
            stack="verbs",
            benchmark=bench.name,
            params=params,
            samples=tuple(point.samples),
            unit=unit,
            direction=direction,
            warmup_discarded=point.warmup * max(1, len(point.job_sizes)),
            metric=metric,
            extra=extra,
        )
    ]


Key = tuple[str, int]  # (the benchmark's key, the size)


class Sweeps(SessionStore[Key, BenchPoint]):
    """Session cache of one side's benchmark points (contract.SessionStore): each (benchmark,
    size) pooled from independent jobs, one job being `runner.run` on a fresh pair of QPs (its
    context: the Benchmark). In a paired A/B run the candidate's store holds the base's (its own
    peers, unstretched by the canary). `guard`: every job metered under the contention guard;
    off on an emulated device, whose data path is the kernel's threads (foreign to the meter)
    and whose points are never judged."""

    def __init__(
        self,
        runner: BenchRunner,
        repeats: int,
        max_repeats: int,
        base: Sweeps | None = None,
        guard: bool = True,
    ) -> None:
        self.runner = runner
        failures: tuple[type[BaseException], ...] = (VerbsCallError, PeerError)
        super().__init__(self._job, merge, repeats, max_repeats, failures, base, guard)

    def _job(self, key: Key, bench: Benchmark) -> BenchPoint:
        if not self.guard:
            return self.runner.run(bench, key[1])
        meter = cpu_share.CpuMeter()
        point = self.runner.run(bench, key[1])
        jobs = cpu_share.of_jobs([meter.stop()])
        return dataclasses.replace(point, cpu=jobs.shares, disturbed=jobs.disturbed)


class BenchRunner:
    """One (benchmark, size) per call, each on a fresh pair of QPs: receives a loop leaves
    posted cannot be taken back, and would catch the next loop's messages in buffers of the
    wrong size. MRs are registered once per pair of peers."""

    def __init__(self, pair: VerbsPair, settings: BenchSettings, max_size: int) -> None:
        self.pair, self.settings = pair, settings
        self.max_size = max(max_size, ATOMIC_SIZE)
        self._mrs: dict[str, dict[str, Any]] = {}
        self._generation = -1

    def _connection(self, qp_type: str) -> Connection:
        window = max(self.settings.bw_iterations, self.settings.warmup) + 8
        conn = self.pair.connect(
            qp_type, max_send_wr=self.settings.depth + 8, max_recv_wr=window, max_sge=1
        )
        if qp_type == "UD":
            together(
                [
                    (conn.a.peer, "ud_remote", {"ep": conn.a.ep, "remote": conn.b.address}),
                    (conn.b.peer, "ud_remote", {"ep": conn.b.ep, "remote": conn.a.address}),
                ]
            )
        return conn

    def _buffers(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self._generation != self.pair.restarts:  # new peers: the old MRs died with them
            # send half + receive half (write_lat), a UD GRH and an atomic's 8 bytes
            length = 2 * self.max_size + 64
            self._mrs = {
                "a": self.pair.reg_mr(self.pair.a, length),
                "b": self.pair.reg_mr(self.pair.b, length),
            }
            self._generation = self.pair.restarts
        return self._mrs["a"], self._mrs["b"]

    def run(self, bench: Benchmark, size: int) -> BenchPoint:
        if bench.atomic:
            size = ATOMIC_SIZE
        mr_a, mr_b = self._buffers()
        conn = self._connection(bench.qp_type)
        n, warmup = self.settings.iterations(bench, size)
        common = {
            "benchmark": bench.loop,
            "size": size,
            "iterations": n,
            "warmup": warmup,
            "batches": self.settings.batches,
            "depth": self.settings.depth,
            "limit": self.settings.limit * self.settings.slowdown,
            "atomic": bench.atomic or "FETCH_AND_ADD",
            "slowdown": self.settings.slowdown,
        }
        limit = self.settings.limit * self.settings.slowdown + 30
        server = conn.b.peer
        try:
            rid = server.start(
                "bench",
                ep=conn.b.ep,
                role="server",
                mr=mr_b["mr"],
                remote={"addr": mr_a["addr"], "rkey": mr_a["rkey"]},
                **common,
            )
            server.wait_for(rid, limit, event=READY)
            out = conn.a.peer.call(
                "bench",
                timeout=limit,
                ep=conn.a.ep,
                role="client",
                mr=mr_a["mr"],
                remote={"addr": mr_b["addr"], "rkey": mr_b["rkey"]},
                **common,
            )
            server.wait_for(rid, limit)
        except (VerbsCallError, PeerError):
            # the other side may still be spinning in its loop until its deadline: start over
            self.pair.restart()
            raise
        conn.close()
        point = self._point(bench, size, n, warmup, out)
        point.canary = [dict(c) for c in out.get("canary", [])]
        return point

    def _point(
        self, bench: Benchmark, size: int, n: int, warmup: int, out: dict[str, Any]
    ) -> BenchPoint:
        if bench.latency:
            per_batch = [deltas(t, bench.rtt_factor) for t in out["times_ns"]]
            samples = [latency_stats(d).t_typical for d in per_batch]
            overall: LatencyStats = latency_stats([x for d in per_batch for x in d])
            return BenchPoint(bench, size, n, warmup, samples, overall.as_dict())
        elapsed = [int(x) for x in out["elapsed_ns"]]
        samples = [bandwidth_mb_s(size, n, t) for t in elapsed]
        total = sum(elapsed)
        stats = {
            "bw_average_mb_s": bandwidth_mb_s(size, n * len(elapsed), total),
            "msg_rate_mpps": message_rate_mpps(n * len(elapsed), total),
            "bw_peak_mb_s": max(samples),
        }
        return BenchPoint(bench, size, n, warmup, samples, stats)
