"""Orchestrator side of the MPI stack: launch one peer job per sweep, parse what it reports.

A sweep (one benchmark over every message size) is one job, so job start-up (~1 s with Open
MPI) is paid once; each (benchmark, size) is still its own test item with its own verdict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.cluster.jobs import JobResult, run_job
from pytest_hpccomm.cluster.launchers import LaunchSpec
from pytest_hpccomm.cluster.launchers.mpirun import MpirunLauncher
from pytest_hpccomm.cluster.launchers.netns import NetnsLauncher
from pytest_hpccomm.cluster.virtual import VirtualCluster
from pytest_hpccomm.stacks.mpi.peer import BEGIN, END
from pytest_hpccomm.stacks.mpi.runtime import MpiRuntime

PROJECT_ROOT = Path(__file__).resolve().parents[3]  # so the MPI env's Python finds the peer


@dataclass(frozen=True)
class SweepSettings:
    """Per profile: enough batches for the verdict's tests, short enough for CI."""

    batches: int
    iterations: int
    warmup: int
    window: int = 64

    @classmethod
    def for_profile(cls, profile: str) -> SweepSettings:
        if profile == "full":
            return cls(batches=60, iterations=1000, warmup=200)
        return cls(batches=30, iterations=200, warmup=100)


@dataclass
class Sweep:
    """What one peer job reported: per-size samples, the MPI library, hosts, data errors."""

    doc: dict[str, Any]
    job: JobResult
    by_size: dict[int, dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.by_size = {int(p["size"]): p for p in self.doc["results"]}

    def errors_for(self, size: int) -> list[str]:
        return [e for e in self.doc.get("errors", []) if f" size={size} " in e + " "]

    @property
    def runtime_fingerprint(self) -> dict[str, Any]:
        return {"mpi_library": self.doc.get("mpi_library"), "mpi4py": self.doc.get("mpi4py"),
                "mpi_standard": self.doc.get("mpi_version"),
                "hosts": ",".join(sorted(set(self.doc.get("hosts", []))))}


class SweepFailed(Exception):
    pass


def parse_output(stdout: str) -> dict[str, Any]:
    start, end = stdout.rfind(BEGIN), stdout.rfind(END)
    if start < 0 or end < start:
        raise SweepFailed("peer printed no result document")
    doc: dict[str, Any] = json.loads(stdout[start + len(BEGIN):end])
    return doc


def peer_argv(runtime: MpiRuntime, benchmark: str, sizes: Sequence[int], s: SweepSettings,
              slowdown: float) -> list[str]:
    return [str(runtime.python), "-m", "pytest_hpccomm.stacks.mpi.peer", "--benchmark", benchmark,
            "--sizes", ",".join(map(str, sizes)), "--batches", str(s.batches),
            "--iterations", str(s.iterations), "--warmup", str(s.warmup),
            "--window", str(s.window), "--slowdown", repr(slowdown)]


def timeout_for(sizes: Sequence[int], s: SweepSettings) -> float:
    """Generous but finite: start-up, plus a budget per size that scales with the data moved."""
    moved = sum(max(sz, 1) * s.batches * max(1, s.iterations // 10) * 4 for sz in sizes)
    return 60.0 + len(sizes) * 2.0 + moved / 20e6


def run_sweep(runtime: MpiRuntime, placement: str, benchmark: str, sizes: Sequence[int],
              settings: SweepSettings, slowdown: float = 1.0,
              cluster: VirtualCluster | None = None) -> Sweep:
    """placement: 'loopback' (2 ranks here, TCP over lo) or 'netns' (1 rank per virtual host)."""
    argv = peer_argv(runtime, benchmark, sizes, settings, slowdown)
    env = {"PYTHONPATH": str(PROJECT_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    timeout = timeout_for(sizes, settings)
    if placement == "netns":
        if cluster is None:
            raise SweepFailed("netns placement needs a virtual cluster")
        netns = NetnsLauncher(cluster, runtime.mpirun, runtime.flavor)
        spec = LaunchSpec(argv, netns.hosts()[:2], env=env)
        return _finish(netns.run(spec, timeout=timeout))  # retries MPICH's MPI_Init flake
    # TCP over loopback: the fabric under test is the network stack, not shared memory
    # (pinned by variables: Open MPI refuses `oob_tcp_if_include lo`, its out-of-band
    # channel needs a non-loopback interface even when every rank is local)
    env |= {"OMPI_MCA_btl_tcp_if_include": "lo", "FI_TCP_IFACE": "lo"}
    spec = LaunchSpec(argv, [Host("localhost")], ranks_per_host=2, env=env, tcp_only=True,
                      bind_none=True)
    launch = MpirunLauncher(runtime.mpirun, runtime.flavor).command(spec)
    return _finish(run_job(launch.argv, launch.env, timeout=timeout))


def _finish(job: JobResult) -> Sweep:
    if not job.ok:
        raise SweepFailed(f"MPI job failed: {job.describe()}")
    try:
        return Sweep(parse_output(job.stdout), job)
    except (ValueError, KeyError) as exc:
        raise SweepFailed(f"unreadable peer output ({exc}): {job.stdout[-300:]!r}") from None
