"""Simulated nights of a nightly against a reference build, with host drift made real.

Each night is one real pytest session of a perf point in reference mode (MPI latency:
`--hpc-reference mpi=REF`, the candidate `--hpc-mpi CAND`; Horovod's synthetic training:
`--hpc-reference horovod=REF`; a build against itself unless told otherwise), recorded in one
history store. On the drift nights the whole session, both sides,
runs under a CPU cap (cgroup quota: benchmarks/cpu_cap.py); from night K on the candidate
carries the canary (--hpc-inject-slowdown), a change of its code only. Afterwards the ratio
gate (baselines/ratio_gate.py) and Otava's change points on the raw medians are run over every
series, and a markdown table per series is printed: which nights each one flags.

    .venv/bin/python benchmarks/nightly_drift.py --out /tmp/drift \\
        --nights 20 --canary-from 13 --canary 1.10 --drift 5-8:1.2,16-17:1.5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.cpu_cap import cpu_cap  # noqa: E402
from pytest_hpccomm.baselines.history import HistoryStore, change_points  # noqa: E402
from pytest_hpccomm.baselines.ratio_gate import judge_series, step_line  # noqa: E402

SUITE = "hpccomm_suites.mpi.test_perf_osu"
NIGHT_TIMEOUT = 900.0


def drift_nights(spec: str) -> dict[int, float]:
    """'5-8:1.2,16:1.5' -> {5: 1.2, 6: 1.2, 7: 1.2, 8: 1.2, 16: 1.5} (night -> CPUs)."""
    out: dict[int, float] = {}
    for part in filter(None, spec.split(",")):
        nights, _, cpus = part.partition(":")
        first, _, last = nights.partition("-")
        for n in range(int(first), int(last or first) + 1):
            out[n] = float(cpus)
    return out


# stack -> (suite, its selection, the reference mode's arguments for REF and CAND)
STACKS = {
    "mpi": (
        "hpccomm_suites.mpi.test_perf_osu",
        ["-k", "osu_latency"],
        lambda ref, cand: [f"--hpc-mpi={cand}", f"--hpc-reference=mpi={ref}"],
    ),
    "horovod": (
        "hpccomm_suites.horovod.test_perf_horovod",
        ["-k", "test_hvd_synthetic_benchmark", "--hpc-horovod-controllers=gloo"],
        lambda ref, cand: [f"--hpc-horovod-python={cand}", f"--hpc-reference=horovod={ref}"],
    ),
}


def night_command(args: argparse.Namespace, night: int) -> list[str]:
    suite, select, sides = STACKS[args.stack]
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        suite,
        *(["-k", args.select] if args.select else select),
        *sides(args.reference, args.candidate),
        f"--hpc-sizes={args.sizes}",
        f"--hpc-ab-rounds={args.rounds}",
        "--hpc-launcher=local",
        f"--hpc-system={args.system}",
        f"--hpc-history={args.out / 'history.sqlite'}",
        f"--hpc-results={args.out / f'night{night:02d}.json'}",
        "-p",
        "no:cacheprovider",
        "-q",
    ]
    if night >= args.canary_from:
        cmd.append(f"--hpc-inject-slowdown={args.canary}")
    return cmd


def run_nights(args: argparse.Namespace) -> list[dict[str, object]]:
    drift = drift_nights(args.drift)
    log = []
    for night in range(1, args.nights + 1):
        cmd = night_command(args, night)
        with ExitStack() as stack:
            prefix = stack.enter_context(cpu_cap(drift[night])) if night in drift else []
            t0 = time.monotonic()
            r = subprocess.run(
                [*prefix, *cmd],
                cwd=args.out,
                capture_output=True,
                text=True,
                timeout=NIGHT_TIMEOUT,
            )
        took = time.monotonic() - t0
        (args.out / f"night{night:02d}.log").write_text(r.stdout + r.stderr)
        log.append(
            {
                "night": night,
                "cpus": drift.get(night),
                "canary": args.canary if night >= args.canary_from else None,
                "exit": r.returncode,
                "seconds": round(took, 1),
            }
        )
        print(f"night {night}: exit {r.returncode}, {took:.0f} s", file=sys.stderr, flush=True)
    return log


def analyse(args: argparse.Namespace, log: list[dict[str, object]]) -> str:
    store = HistoryStore(args.out / "history.sqlite")
    lines = []
    for key in store.keys():
        records = store.ratio_records(*key[:5])
        raw = change_points([r.median for r in records])
        gate = judge_series(records, args.tolerance, last=len(records))
        lines.append(f"### {key.stack} {key.benchmark} {key.params_key}\n")
        lines.append(
            "| night | CPUs (both sides) | canary (candidate) | candidate median | "
            "reference median | ratio (CI) | raw change point | ratio step |"
        )
        lines.append("|---|---|---|---|---|---|---|---|")
        raw_at = {cp.index: cp for cp in raw}
        step_at = {s.index: s for s in gate.steps}
        for i, (night, r) in enumerate(zip(log, records, strict=True)):
            cp, step = raw_at.get(i), step_at.get(i)
            lines.append(
                f"| {night['night']} | {night['cpus'] or '-'} | {night['canary'] or '-'} | "
                f"{r.median:.2f} | {r.base_median or 0:.2f} | {r.ratio:.3f} "
                f"({r.ci_low:.3f}-{r.ci_high:.3f}) | "
                f"{f'{cp.rel_change * 100:+.0f} %' if cp else ''} | "
                f"{f'{step.step:.3f}' if step else ''} |"
            )
        lines.append("")
        lines.append(f"raw-median change points: {len(raw)} (nights {[c.index + 1 for c in raw]})")
        for s in gate.steps:
            lines.append(f"ratio gate: {step_line(s)}")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--nights", type=int, default=20)
    ap.add_argument("--canary-from", type=int, default=13)
    ap.add_argument("--canary", type=float, default=1.10)
    ap.add_argument("--drift", default="5-8:1.2,16-17:1.5", help="NIGHTS:CPUS,...")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--sizes", default="8,1K")
    ap.add_argument("--stack", choices=sorted(STACKS), default="mpi")
    ap.add_argument("--select", default="", help="pytest -k (default: the stack's point)")
    ap.add_argument("--reference", default="", help="default: openmpi / build")
    ap.add_argument("--candidate", default="", help="default: the reference's name")
    ap.add_argument("--system", default="drift")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--analyse-only", action="store_true")
    args = ap.parse_args(argv)
    args.reference = args.reference or {"mpi": "openmpi", "horovod": "build"}[args.stack]
    args.candidate = args.candidate or args.reference
    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.analyse_only:
        log = json.loads((args.out / "nights.json").read_text())
    else:
        log = run_nights(args)
        (args.out / "nights.json").write_text(json.dumps(log, indent=1))
    print(analyse(args, log))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
