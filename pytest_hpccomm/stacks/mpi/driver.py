"""Orchestrator side of the MPI stack: launch peer jobs, parse them, turn points into records.

One job runs several benchmarks back to back (Open MPI takes ~1 s to start, 14 benchmarks x 2
MPIs x 2 placements would spend a minute starting): `run_sweep(..., "osu_latency,osu_bw", ...)`.
Each (benchmark, size) is still its own test item with its own verdict. The peer prints each
benchmark's document when it finishes, so a job that crashes or times out later still says
what it measured, but every item of a failed job fails with the job's reason: a crash in
MPI_Finalize or a hung rank is a defect of the MPI however good the timings were.

More: docs/explanation/internals.md (pytest_hpccomm.stacks.mpi.driver).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Sequence

from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.cluster.launchers import Launch
from pytest_hpccomm.cluster.peer_env import peer_env
from pytest_hpccomm.cluster.placed_launch import PlacedLaunch, PlacementError, mpi_launch
from pytest_hpccomm.cluster.placement import HOSTS, LOOPBACK, NETNS
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.measure import metrics
from pytest_hpccomm.measure.link import LinkRate, shaped_fingerprint, with_link_rate
from pytest_hpccomm.measure.measurement import Direction, Measurement, Param
from pytest_hpccomm.measure.pooling import canary_extra, jobs_extra, pool_point
from pytest_hpccomm.peer import framing
from pytest_hpccomm.proc import cpu_share, stacks
from pytest_hpccomm.proc.jobs import JobResult
from pytest_hpccomm.stacks.mpi.env import HANG_DIR, MPI_CALLS, NATIVE_WORDS, MpiRuntime
from pytest_hpccomm.stacks.mpi.transport import Transport
from pytest_hpccomm.stacks.mpi.wire import BENCHMARKS, COLLECTIVES, GATHERS, PAIR, SCATTERS

BANDWIDTH = ("osu_bw", "osu_bibw", "osu_mbw_mr")


@dataclass(frozen=True)
class SweepSettings:
    """Per profile. A batch moves at most `batch_bytes` (fewer iterations for large messages;
    for windowed benchmarks: per slot of the window); a size gets `min_batches` batches, then
    more until `budget` seconds or `batches`."""

    batches: int
    min_batches: int
    budget: float
    iterations: int  # ping-pongs per batch
    loops: int  # windows per batch (osu_bw, osu_bibw, osu_mbw_mr)
    coll_iterations: int  # collective operations per batch
    batch_bytes: int
    warmup: int  # OSU's skip for small messages (a tenth above 8 KiB)
    window: int = 64

    @classmethod
    def for_profile(cls, profile: str) -> SweepSettings:
        if profile == "full":
            return cls(
                batches=100,
                min_batches=20,
                budget=2.0,
                iterations=1000,
                loops=20,
                coll_iterations=200,
                batch_bytes=16 << 20,
                warmup=200,
            )
        return cls(
            batches=30,
            min_batches=10,
            budget=0.1,
            iterations=200,
            loops=10,
            coll_iterations=50,
            batch_bytes=1 << 20,
            warmup=100,
        )


class SweepFailed(Exception):
    pass


@dataclass
class Sweep:
    """What one peer job reported: one document per finished benchmark."""

    docs: dict[str, dict[str, Any]]
    job: JobResult
    failure: str = ""  # why the job failed (every benchmark of it fails, see doc())
    transport: str = ""  # SweepTarget.transport_summary, into the fingerprint
    cpu: tuple[dict[str, float], ...] = ()  # per job: who used the cores (cpu_share.py)
    disturbed: str = ""  # why a job's timings are not its own ("" when the cores were ours)
    reruns: int = 0  # jobs run again because another process shared the cores
    link: LinkRate | None = None  # the link the ranks' bytes crossed (None: rate unknown)
    by_size: dict[str, dict[int, dict[str, Any]]] = field(init=False)

    def __post_init__(self) -> None:
        self.by_size = {b: {int(p["size"]): p for p in d["results"]} for b, d in self.docs.items()}

    def only(self, benchmark: str) -> Sweep:
        """This job as if it had run `benchmark` alone (its other documents left out)."""
        return dataclasses.replace(
            self, docs={b: d for b, d in self.docs.items() if b == benchmark}
        )

    def doc(self, benchmark: str) -> dict[str, Any]:
        """The benchmark's document; a job that exited non-zero or timed out fails every
        benchmark, also those it printed before: an MPI that crashes in MPI_Finalize, or
        leaves a rank hanging, is broken whatever its timings were."""
        if benchmark not in self.docs:
            raise SweepFailed(f"{benchmark} did not finish: {self.failure or 'not run'}")
        if self.failure:
            raise SweepFailed(f"{benchmark} printed its results, but {self.failure}")
        return self.docs[benchmark]

    def point(self, benchmark: str, size: int) -> dict[str, Any]:
        self.doc(benchmark)
        if size not in self.by_size[benchmark]:
            raise SweepFailed(f"{benchmark}: no result for size {size}")
        return self.by_size[benchmark][size]

    def errors_for(self, benchmark: str, size: int) -> list[str]:
        return [e for e in self.doc(benchmark).get("errors", []) if f" size={size} " in e + " "]

    @property
    def runtime_fingerprint(self) -> dict[str, Any]:
        doc = next(iter(self.docs.values()), {})
        return {
            "mpi_library": doc.get("mpi_library"),
            "mpi4py": doc.get("mpi4py"),
            "mpi_standard": doc.get("mpi_version"),
            "hosts": ",".join(sorted(set(doc.get("hosts", [])))),
            "mpi_transport": self.transport,
            **shaped_fingerprint(self.link),
        }


def parse_output(stdout: str) -> dict[str, dict[str, Any]]:
    """Every complete document between markers, by benchmark; a cut-off last one is ignored."""
    return {str(doc["benchmark"]): doc for doc in framing.parse_all(stdout)}


def job_groups(benchmarks: Iterable[str], placement: str, hosts: int) -> list[tuple[str, ...]]:
    """Benchmarks that can share one job. Two-rank benchmarks need a job of exactly 2 ranks
    (idle ranks would spin on the cores the pair needs, and a collective over more hosts than
    the pair's is another job); with 2 hosts everything fits one."""
    chosen = [b for b in BENCHMARKS if b in set(benchmarks)]
    pair = tuple(b for b in chosen if b in PAIR)
    wide = tuple(b for b in chosen if b not in PAIR)
    if placement in ("netns", "hosts") and hosts > 2 and pair and wide:
        return [pair, wide]
    return [tuple(chosen)] if chosen else []


PEER_MODULE = "pytest_hpccomm.stacks.mpi.peer"  # the benchmark peer (peer/__main__.py)


def peer_argv(
    runtime: MpiRuntime,
    benchmarks: str,
    sizes: Sequence[int],
    s: SweepSettings,
    slowdown: float,
    corrupt: bool = False,
) -> list[str]:
    argv = [
        str(runtime.python),
        "-m",
        PEER_MODULE,
        "--benchmark",
        benchmarks,
        "--sizes",
        ",".join(map(str, sizes)),
        "--batches",
        str(s.batches),
        "--min-batches",
        str(s.min_batches),
        "--budget",
        repr(s.budget),
        "--iterations",
        str(s.iterations),
        "--loops",
        str(s.loops),
        "--coll-iterations",
        str(s.coll_iterations),
        "--batch-bytes",
        str(s.batch_bytes),
        "--warmup",
        str(s.warmup),
        "--window",
        str(s.window),
        "--slowdown",
        repr(slowdown),
    ]
    return argv + (["--corrupt"] if corrupt else [])


def timeout_for(
    benchmarks: Sequence[str], sizes: Sequence[int], s: SweepSettings, ranks: int = 2
) -> float:
    """Generous but finite: start-up, plus per (benchmark, size) the time box and the fewest
    batches (with warm-up and validation) at 200 MB/s and 0.5 ms per iteration: 10-100x
    slower than TCP over loopback or a veth here (quick profile, all 14: ~40 s, timeout ~13 min)."""
    total = 60.0
    for b in benchmarks:
        for size in [0] if b == "osu_barrier" else sizes:
            per_iter = max(size, 1) * (ranks if b in COLLECTIVES else 2)
            cap = (
                s.loops
                if b in BANDWIDTH
                else s.coll_iterations
                if b in COLLECTIVES
                else s.iterations
            )
            n = max(1, min(cap, s.batch_bytes // per_iter))
            if b in BANDWIDTH:  # n windows of `window` messages, both ways for osu_bibw
                n, per_iter = max(1, min(cap, s.batch_bytes // max(size, 1))), per_iter * s.window
            batch = n * per_iter / 200e6 + n * 5e-4
            total += 1.0 + s.budget + (s.min_batches + 3) * batch
    return total


@dataclass(frozen=True)
class SweepTarget:
    """Where a sweep runs and over what. placement: 'loopback' (2 ranks here), 'netns' (one rank
    per virtual host; 2 hosts if all benchmarks are two-rank ones) or 'hosts' (one rank per
    host of `hosts`, started by `launcher` = mpirun over `rsh_agent` (default ssh) or srun).
    transport: how MPI is pinned to the session's fabric (None: TCP over lo / the veths)."""

    placement: str
    cluster: VirtualCluster | None = None
    hosts: tuple[Host, ...] = ()
    transport: Transport | None = None
    launcher: str = "mpirun"
    rsh_agent: str | None = None
    bind_none: bool = False  # hosts placement: hosts that share cores (see --hpc-bind)
    timeout_scale: float = 1.0  # emulated devices (rxe, siw) move data 10-100x slower
    link: LinkRate | None = None  # hosts placement: the fabric's rate from discovery

    @property
    def transport_summary(self) -> str:
        if self.transport is not None:
            return self.transport.summary
        return {"loopback": "tcp over lo", "netns": "tcp over the virtual cluster's veths"}.get(
            self.placement, ""
        )


def run_sweep(
    runtime: MpiRuntime,
    target: SweepTarget | str,
    benchmark: str,
    sizes: Sequence[int],
    settings: SweepSettings,
    slowdown: float = 1.0,
    corrupt: bool = False,
) -> Sweep:
    """Run the comma-separated `benchmark`s in one job at `target` (a bare placement name is
    SweepTarget(name))."""
    target = SweepTarget(target) if isinstance(target, str) else target
    names = [b for b in benchmark.split(",") if b]
    if target.placement not in (LOOPBACK, NETNS, HOSTS):  # never measure localhost under
        raise SweepFailed(
            f"placement {target.placement!r}: the MPI sweep runs on loopback, netns or hosts"
        )  # another placement's name
    argv = peer_argv(runtime, ",".join(names), sizes, settings, slowdown, corrupt)
    hosts = _hosts(target, pair_only=all(b in PAIR for b in names))
    env = peer_env(
        _oversubscribed(len(hosts)) if hosts and target.placement == NETNS else None,
        own_python=runtime.name == "system",
    )
    placed = _placed(runtime, target, argv, env, hosts)
    timeout = timeout_for(names, sizes, settings, placed.ranks) * target.timeout_scale
    link = _link_rate(target, hosts)
    job = placed.run_ending_at_init_failure(timeout)
    sweep = _finish(job, target.transport_summary)
    # shaping changed while the job ran: no one rate describes it
    sweep.link = link if link == _link_rate(target, hosts) else None
    return sweep


def _link_rate(target: SweepTarget, hosts: Sequence[Host] | None) -> LinkRate | None:
    """The rate of the link between the job's hosts: the virtual cluster's shaping, or the
    fabric's discovered rate on real hosts; loopback crosses no link."""
    if target.placement == NETNS and target.cluster is not None and hosts:
        return target.cluster.link_rate([h.name for h in hosts])
    return target.link if target.placement == HOSTS else None


def _hosts(target: SweepTarget, pair_only: bool) -> list[Host] | None:
    """The hosts of a netns or hosts job (None: loopback); two-rank benchmarks take the first
    two (job_groups)."""
    if target.placement == NETNS:
        if target.cluster is None:
            raise SweepFailed("netns placement needs a virtual cluster")
        hosts = [Host(h.name) for h in target.cluster.hosts]
    elif target.placement == HOSTS:
        hosts = list(target.hosts)
    else:
        return None
    hosts = hosts[:2] if pair_only else hosts
    if target.placement == HOSTS and len(hosts) < 2:
        raise SweepFailed(
            f"hosts placement needs at least 2 hosts, got "
            f"{','.join(h.name for h in hosts) or 'none'}"
        )
    return hosts


def _placed(
    runtime: MpiRuntime,
    target: SweepTarget,
    argv: Sequence[str],
    env: Mapping[str, str],
    hosts: Sequence[Host] | None,
) -> PlacedLaunch:
    """The job at the target (cluster/placed_launch.mpi_launch): on loopback 2 ranks; the
    transport pins MPI to the session's fabric (see transport.py)."""
    try:
        placed = mpi_launch(
            target.placement,
            argv,
            env,
            runtime.mpirun,
            runtime.flavor,
            hosts=hosts,
            cluster=target.cluster,
            pins=target.transport,
            launcher=target.launcher,
            rsh_agent=target.rsh_agent,
            bind_none=target.bind_none,
        )
    except PlacementError as exc:
        raise SweepFailed(str(exc)) from None
    # a job its timeout ends says where its ranks waited (their native stacks, by gdb)
    return dataclasses.replace(
        placed, on_timeout=stacks.on_timeout(PEER_MODULE, NATIVE_WORDS, HANG_DIR, MPI_CALLS)
    )


def hosts_launch(
    runtime: MpiRuntime,
    argv: Sequence[str],
    env: Mapping[str, str],
    hosts: Sequence[Host],
    target: SweepTarget,
) -> Launch:
    """One rank per host, transport pinned to the fabric (see transport.py): the command
    run_sweep runs for the hosts placement."""
    return _placed(runtime, dataclasses.replace(target, placement=HOSTS), argv, env, hosts).launch


def loopback_launch(
    runtime: MpiRuntime,
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    transport: Transport | None = None,
) -> Launch:
    """2 ranks here: TCP over loopback on a TCP fabric (or none given), the fabric under test
    is the network stack, not shared memory; on an RDMA fabric both ranks go through the HCA
    (the transport's variables; no shared memory). Also what benchmarks/mpi_fidelity.py runs
    OSU's C binaries with."""
    return _placed(
        runtime, SweepTarget(LOOPBACK, transport=transport), argv, env or {}, None
    ).launch


def _oversubscribed(ranks: int) -> dict[str, str]:
    """More ranks than cores: Open MPI's busy polling then starves the rank that has work
    (3 ranks on 2 cores: an 8-byte allreduce sweep took 58 s instead of 0.3 s)."""
    return {"OMPI_MCA_mpi_yield_when_idle": "1"} if ranks > (os.cpu_count() or 1) else {}


def _finish(job: JobResult, transport: str = "") -> Sweep:
    try:
        docs = parse_output(job.stdout)
    except (ValueError, KeyError) as exc:
        raise SweepFailed(f"unreadable peer output ({exc}): {job.stdout[-300:]!r}") from None
    cpu = cpu_share.of_jobs([job.cpu])
    if job.ok:
        return Sweep(docs, job, transport=transport, cpu=cpu.shares, disturbed=cpu.disturbed)
    hung = f"\n{job.hung}" if job.hung else ""
    if not docs:
        raise SweepFailed(f"MPI job failed: {job.describe()}{hung}")
    return Sweep(
        docs,
        job,
        failure=f"MPI job failed after {', '.join(docs)}: {job.describe()}{hung}",
        transport=transport,
        cpu=cpu.shares,
        disturbed=cpu.disturbed,
    )


def merge_sweeps(sweeps: Sequence[Sweep]) -> Sweep:
    """One Sweep from independent jobs of the same benchmarks: per point, the batches of every
    job in job order (samples, max_samples, rate_samples), warm-up summed, errors of all jobs,
    each job's median kept as `job_medians` (measure/pooling.py says why). A benchmark or size
    missing from any job is missing here."""
    if len(sweeps) == 1:
        return sweeps[0]
    first = sweeps[0]
    docs: dict[str, dict[str, Any]] = {}
    for bench, doc in first.docs.items():
        if not all(bench in s.docs for s in sweeps):
            continue
        merged = dict(
            doc,
            errors=[e for s in sweeps for e in s.docs[bench].get("errors", [])],
            jobs=len(sweeps),
        )
        results = []
        for point in doc["results"]:
            size = int(point["size"])
            parts = [s.by_size[bench][size] for s in sweeps if size in s.by_size[bench]]
            if len(parts) == len(sweeps):
                results.append(
                    pool_point(parts, ("samples", "max_samples", "rate_samples", "unstretched"))
                )
        docs[bench] = dict(merged, results=results)
    failure = next((s.failure for s in sweeps if s.failure), "")
    return Sweep(
        docs,
        sweeps[-1].job,
        failure=failure,
        transport=first.transport,
        cpu=tuple(c for s in sweeps for c in s.cpu),
        disturbed=next((s.disturbed for s in sweeps if s.disturbed), ""),
        reruns=sum(s.reruns for s in sweeps),
        link=first.link if all(s.link == first.link for s in sweeps) else None,
    )


# -- records -----------------------------------------------------------------------------------
def collective_bytes(benchmark: str, size: int, ranks: int) -> int:
    """nccl-tests' S for algbw = S / t: the whole gathered (scattered, exchanged) array when OSU's
    size is one rank's block (allgather, alltoall, gather, scatter), else OSU's size."""
    return size * ranks if benchmark in GATHERS + SCATTERS else size


def busbw_factor(benchmark: str, ranks: int) -> float:
    """nccl-tests' bus bandwidth factor of an OSU collective (osu_allreduce -> allreduce)."""
    return metrics.busbw_factor(benchmark.removeprefix("osu_"), ranks)


def busbw_samples(
    benchmark: str, size: int, ranks: int, latency_us: Sequence[float]
) -> tuple[list[float], list[float]]:
    """(algbw, busbw) in GB/s per batch, from the batches' average latency in us."""
    nbytes, factor = collective_bytes(benchmark, size, ranks), busbw_factor(benchmark, ranks)
    algbw = [metrics.nccl_algbw_gb_s(nbytes, t / 1e6) for t in latency_us]
    return algbw, [a * factor for a in algbw]


PRIMARY = {  # benchmark -> (metric, unit, direction)
    "osu_latency": ("latency", metrics.UNIT_LATENCY, Direction.LOWER_IS_BETTER),
    "osu_multi_lat": ("latency", metrics.UNIT_LATENCY, Direction.LOWER_IS_BETTER),
    **{b: ("bandwidth", metrics.UNIT_OSU_BANDWIDTH, Direction.HIGHER_IS_BETTER) for b in BANDWIDTH},
    **{b: ("latency", metrics.UNIT_LATENCY, Direction.LOWER_IS_BETTER) for b in COLLECTIVES},
}


def measurements(
    sweep: Sweep, benchmark: str, size: int, params: Mapping[str, Param]
) -> list[Measurement]:
    """The records of one test item: the OSU metric, then the second view if it has one
    (busbw of a collective with data, message rate of osu_mbw_mr). `params` names the run
    (mpi, placement); size and ranks (those taking part) are added here."""
    doc, point = sweep.doc(benchmark), sweep.point(benchmark, size)
    ranks = int(doc.get("participants", doc["ranks"]))
    keyed: dict[str, Param] = {**params, "ranks": ranks}
    if benchmark != "osu_barrier":
        keyed["size"] = size
    metric, unit, direction = PRIMARY[benchmark]
    samples = [float(x) for x in point["samples"]]
    extra: dict[str, Any] = {
        "iterations_per_sample": point["iterations"],
        "timer_us": doc.get("timer_us"),
    }
    if "max_samples" in point:
        extra["max_rank_latency_us"] = statistics.median(point["max_samples"])
    extra |= canary_extra(point)  # the canary's own work: the host's speed tonight
    if "job_medians" in point:  # pooled from several jobs (merge_sweeps)
        extra["job_medians"] = point["job_medians"]
        extra["job_sizes"] = point["job_sizes"]  # the verdict resamples whole jobs
    extra |= cpu_share.evidence_extra(sweep)  # a non-empty "disturbed" tempers the verdict
    jobs = jobs_extra(point, medians=False)
    out = [
        Measurement(
            stack="mpi",
            benchmark=benchmark,
            params=keyed,
            samples=tuple(samples),
            unit=unit,
            direction=direction,
            warmup_discarded=int(point["warmup"]),
            metric=metric,
            extra=extra,
        )
    ]
    if benchmark in COLLECTIVES and benchmark != "osu_barrier" and size > 0:
        algbw, busbw = busbw_samples(benchmark, size, ranks, samples)
        out.append(
            Measurement(
                stack="mpi",
                benchmark=benchmark,
                params={**keyed, "metric": "busbw"},
                samples=tuple(busbw),
                unit=metrics.UNIT_NCCL_BANDWIDTH,
                direction=Direction.HIGHER_IS_BETTER,
                warmup_discarded=int(point["warmup"]),
                metric="busbw",
                extra={
                    "algbw_gb_s": statistics.median(algbw),
                    "busbw_factor": busbw_factor(benchmark, ranks),
                    "bytes": collective_bytes(benchmark, size, ranks),
                    **jobs,
                },
            )
        )
    if benchmark == "osu_mbw_mr" and "rate_samples" in point:
        out.append(
            Measurement(
                stack="mpi",
                benchmark=benchmark,
                params={**keyed, "metric": "message_rate"},
                samples=tuple(float(x) for x in point["rate_samples"]),
                unit=metrics.UNIT_MESSAGE_RATE,
                direction=Direction.HIGHER_IS_BETTER,
                warmup_discarded=int(point["warmup"]),
                metric="message_rate",
                extra={
                    "pairs": point.get("pairs"),
                    "window": point.get("window"),
                    **(jobs if len(point["rate_samples"]) == len(samples) else {}),
                },
            )
        )
    return [with_link_rate(m, sweep.link) for m in out]  # bandwidths: the link they crossed
