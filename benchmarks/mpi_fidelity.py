"""Fidelity of the MPI suite: its osu_latency / osu_bw against OSU's own C binaries.

Not a test: a script. Both sides run here, in one run, interleaved round by round (the order
alternates), built against the SAME MPI (the per-MPI environments' mpicc), with the same
transport settings (2 ranks, TCP over loopback, --bind-to none: driver.loopback_launch).
The suite side is the suite's own job (driver.run_sweep, quick profile), summarised two ways:
the median of its batch samples (what verdicts compare) and its mean over all iterations
(OSU's statistic: OSU prints total time over total iterations). Other jobs share this
machine: a round starts once they use less than --quiet of the CPUs (/proc/stat), and each
ratio is the median over rounds of that round's suite / OSU. Targets: latency <= 1.25 at 8 B
and <= 1.05 at 1 MiB, bandwidth >= 0.95 from 64 KiB.

    .venv/bin/python benchmarks/mpi_fidelity.py --osu openmpi=DIR --osu mpich=DIR [--rounds 9]

DIR is an OSU Micro-Benchmarks build tree (c/mpi/pt2pt/standard/osu_latency and osu_bw) made
with that MPI's compiler; build it outside this repository (run with no --osu for the recipe).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from pytest_hpccomm.cluster.mpi import mpi_prefix
from pytest_hpccomm.measure.sizes import format_size, parse_size_spec
from pytest_hpccomm.proc.jobs import run_job
from pytest_hpccomm.stacks.mpi.driver import SweepSettings, loopback_launch, run_sweep
from pytest_hpccomm.stacks.mpi.env import MpiRuntime, resolve

PT2PT = Path("c/mpi/pt2pt/standard")
BUILD = """\
OSU Micro-Benchmarks are not part of this repository. Build them per MPI, outside it, e.g.:
  tar -xf osu-micro-benchmarks-7.4.tar.gz -C /tmp   # or any source tree with ./configure
  cp -r /tmp/osu-micro-benchmarks-7.4 /tmp/osu-{name} && cd /tmp/osu-{name}
  ./configure CC={prefix}/bin/mpicc CXX={prefix}/bin/mpicxx
  make -C c/mpi/pt2pt/standard   # (a git checkout: add ACLOCAL=true AUTOMAKE=true AUTOCONF=true)
then pass --osu {name}=/tmp/osu-{name}"""
TARGETS = {"latency": {8: 1.25, 1 << 20: 1.05}}


def osu_table(stdout: str) -> dict[int, float]:
    """OSU's output: '#' header lines, then 'size value' rows."""
    rows = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit():
            rows[int(parts[0])] = float(parts[1])
    return rows


def run_osu(runtime: MpiRuntime, binary: Path, lo: int, hi: int) -> dict[int, float]:
    launch = loopback_launch(runtime, [str(binary), "-m", f"{lo}:{hi}"])
    job = run_job(launch.argv, launch.env, timeout=300, scratch=launch.scratch)
    if not job.ok:
        raise SystemExit(f"{binary.name}: {job.describe()}")
    return osu_table(job.stdout)


def run_suite(runtime: MpiRuntime, sizes: list[int]) -> dict[str, dict[int, float]]:
    """Per benchmark and size: the batches' median (what verdicts compare) and, under
    "<benchmark>:mean", the time-weighted mean (total bytes or iterations over total time),
    OSU's own statistic."""
    sweep = run_sweep(
        runtime, "loopback", "osu_latency,osu_bw", sizes, SweepSettings.for_profile("quick")
    )
    out: dict[str, dict[int, float]] = {}
    for b in ("osu_latency", "osu_bw"):
        for s in sizes:
            xs = sweep.point(b, s)["samples"]
            out.setdefault(b, {})[s] = statistics.median(xs)
            # latency: mean of per-batch means; bandwidth: harmonic mean = bytes / total time
            out.setdefault(f"{b}:mean", {})[s] = (
                statistics.fmean(xs) if b == "osu_latency" else statistics.harmonic_mean(xs)
            )
    return out


def busy_fraction(seconds: float = 1.0) -> float:
    """Share of this machine's CPU time others used over `seconds` (we are idle meanwhile)."""

    def ticks() -> tuple[int, int]:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait

    t0, i0 = ticks()
    time.sleep(seconds)
    t1, i1 = ticks()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_quiet(limit: float, max_wait: float) -> float:
    """Other jobs share this machine: start a round only once they leave the cores alone
    (or after max_wait seconds); returns the busy fraction seen last."""
    deadline = time.monotonic() + max_wait
    while (busy := busy_fraction()) > limit and time.monotonic() < deadline:
        pass
    return busy


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--osu",
        action="append",
        default=[],
        metavar="MPI=DIR",
        help="an OSU build tree per MPI environment (openmpi, openmpi4, mpich)",
    )
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--lat-sizes", default="8,1K,64K,1M")
    p.add_argument("--bw-sizes", default="64K,256K,1M,4M")
    p.add_argument(
        "--quiet",
        type=float,
        default=0.2,
        help="start a round when others use less than this share of the CPUs",
    )
    p.add_argument("--max-wait", type=float, default=300.0)
    args = p.parse_args(argv)
    if not args.osu:
        print(BUILD.format(name="openmpi", prefix=mpi_prefix("openmpi")))
        return 2
    lat, bw = parse_size_spec(args.lat_sizes), parse_size_spec(args.bw_sizes)
    tools: list[tuple[str, MpiRuntime, Path]] = []
    for item in args.osu:
        name, _, tree = item.partition("=")
        bindir = Path(tree) / PT2PT
        if not (bindir / "osu_latency").is_file() or not (bindir / "osu_bw").is_file():
            print(
                f"no osu_latency/osu_bw under {bindir}\n"
                + BUILD.format(name=name, prefix=mpi_prefix(name)),
                file=sys.stderr,
            )
            return 2
        tools.append((name, resolve(name), bindir))
    # (mpi, side, statistic) -> size -> one value per round
    got: dict[tuple[str, str, str], dict[int, list[float]]] = {}

    def keep(mpi: str, side: str, stat: str, values: dict[int, float]) -> None:
        for size in lat if stat.startswith("osu_latency") else bw:
            got.setdefault((mpi, side, stat), {}).setdefault(size, []).append(values[size])

    for r in range(args.rounds):
        for name, runtime, bindir in tools:
            busy = wait_quiet(args.quiet, args.max_wait)
            for side in ("osu", "suite") if r % 2 == 0 else ("suite", "osu"):
                if side == "osu":
                    keep(
                        name,
                        side,
                        "osu_latency",
                        run_osu(runtime, bindir / "osu_latency", min(lat), max(lat)),
                    )
                    keep(
                        name, side, "osu_bw", run_osu(runtime, bindir / "osu_bw", min(bw), max(bw))
                    )
                else:
                    for stat, values in run_suite(runtime, sorted(set(lat) | set(bw))).items():
                        keep(name, side, stat, values)
            print(
                f"round {r + 1}/{args.rounds} {name}: others used {busy:.0%} of the CPUs before it",
                file=sys.stderr,
            )

    for name, runtime, _ in tools:
        print(f"\n### {runtime.flavor} ({name}): {args.rounds} interleaved rounds\n")
        print(
            "Values: median over rounds. Ratios: median (and interquartile range) over rounds "
            "of suite / OSU C.\n"
        )
        print(
            "| benchmark | size | OSU C | suite (median) | ratio | ratio IQR | suite (mean) "
            "| ratio | target |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for bench, unit, sizes in (("osu_latency", "us", lat), ("osu_bw", "MB/s", bw)):
            for size in sizes:
                c = got[(name, "osu", bench)][size]
                med = got[(name, "suite", bench)][size]
                mean = got[(name, "suite", f"{bench}:mean")][size]
                ratios = [m / o for m, o in zip(med, c)]
                ratio = statistics.median(ratios)
                q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratio] * 3
                ratio_mean = statistics.median(m / o for m, o in zip(mean, c))
                target = (
                    f"<= {TARGETS['latency'][size]}"
                    if bench == "osu_latency" and size in TARGETS["latency"]
                    else ">= 0.95"
                    if bench == "osu_bw" and size >= 64 << 10
                    else ""
                )
                print(
                    f"| {bench} | {format_size(size)} | {statistics.median(c):.2f} {unit} | "
                    f"{statistics.median(med):.2f} {unit} | {ratio:.3f} | {q1:.2f}-{q3:.2f} | "
                    f"{statistics.median(mean):.2f} {unit} | {ratio_mean:.3f} | {target} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
