"""Run the mutation catalogue against the quick profile and print the kill ratio.

Not a test: a script. Every mutant (catalogue.py, `<stack>.toml`) is applied to a scratch copy
of the package and suites; the stack's conformance suite runs against that copy (PYTHONPATH, so
the peers run the mutated code too) with `-x`. A mutant is killed when a test fails; "survived"
when the suite passes; "error" when pytest could not run it (usage/internal error, guest did
not boot) and "hung" when the outer timeout fired: neither counts as a kill. An unmutated
control run goes first for each stack and must pass, else nothing is counted.

MPI and gRPC run on this host (loopback and the virtual cluster, as the quick profile does);
verbs runs in the SoftRoCE guest (ci/guest), all its mutants in one boot, each in its own copy.
Native gRPC builds of mutants go to a scratch cache, removed at the end.

    .venv/bin/python benchmarks/mutants/run.py [--stack mpi,grpc,verbs] [--only ID,...]
        [--runs 3] [--json out.json]
    .venv/bin/python benchmarks/mutants/run.py --check [STACK ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from catalogue import REPO, STACKS, Mutant, load, problems, scratch_copy  # noqa: E402

from pytest_hpccomm.proc.jobs import run_job  # noqa: E402

DEFAULT_SELECT = {
    "mpi": ("hpccomm_suites/mpi", "-m", "conformance"),
    "grpc": ("hpccomm_suites/grpc", "-m", "conformance"),
    "verbs": ("-m", "conformance"),  # ci/guest/run.sh names hpccomm_suites/verbs itself
}
HOST_TIMEOUT = 1800.0  # one suite run against one mutant
GUEST_ITEM_TIMEOUT = 300  # per mutant inside the guest


@dataclass
class Outcome:
    mutant: str
    run: int
    status: str  # killed | survived | error | hung
    caught_by: list[str]
    seconds: float
    detail: str = ""


def failed_tests(junit: Path) -> list[str]:
    if not junit.is_file():
        return []
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            out.append(f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}")
    return out


def expect_pass(control: Outcome, stack: str, select: tuple[str, ...], run: int) -> None:
    what = " ".join(select or DEFAULT_SELECT[stack])
    if control.status != "survived":
        raise SystemExit(
            f"control run of {stack} ({what}) did not pass ({control.status}: "
            f"{control.caught_by or control.detail}): nothing counted"
        )
    print(f"control {stack} ({what}) run {run + 1}: passed in {control.seconds:.0f} s", flush=True)


def run_on_host(
    mutant: Mutant | None,
    stack: str,
    work: Path,
    grpc_cache: Path,
    run: int,
    select: tuple[str, ...],
) -> Outcome:
    name = mutant.id if mutant else f"control-{stack}"
    tree = scratch_copy(work / f"{name}-{run}", mutant)
    junit = tree / "junit.xml"
    select = select or DEFAULT_SELECT[stack]
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-x",
        "-q",
        "--timeout=300",
        f"--junitxml={junit}",
        *select,
    ]
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HPCCOMM_GRPC_CACHE": str(grpc_cache),
        "HYPOTHESIS_STORAGE_DIRECTORY": str(tree / ".hypothesis"),
    }  # nothing carried over
    res = run_job(argv, env=env, cwd=tree, timeout=HOST_TIMEOUT, label=f"pytest {name}")
    try:
        return judge(
            name,
            run,
            res.returncode,
            res.timed_out,
            failed_tests(junit),
            res.elapsed,
            res.stdout + res.stderr,
        )
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def judge(
    name: str, run: int, rc: int, timed_out: bool, failed: list[str], seconds: float, output: str
) -> Outcome:
    if timed_out:
        return Outcome(name, run, "hung", [], seconds, "outer timeout")
    if rc == 1 and failed:
        return Outcome(name, run, "killed", failed, seconds)
    if rc == 0:
        return Outcome(name, run, "survived", [], seconds)
    tail = [ln for ln in output.strip().splitlines() if ln.strip()][-3:]
    return Outcome(name, run, "error", failed, seconds, f"exit {rc}: {' | '.join(tail)}")


GUEST_SCRIPT = r"""
cd /project
mkdir -p /tmp/py && ln -sfn /opt/hpccomm/site /tmp/py/site-packages
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
for name in {names}; do
  export PYTHONPATH=/tmp/py/site-packages:/project/m/$name
  export HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hypothesis-$name
  cd /project/m/$name
  plugins=$(python3 - <<"EOF"
from importlib.metadata import entry_points
have = {{e.value for e in entry_points(group="pytest11")}}
want = ("pytest_hpccomm.plugin", "pytest_hpccomm.stacks.verbs.plugin")
print(" ".join(f"-p {{m}}" for m in want if m not in have))
EOF
)
  t0=$(date +%s.%N)
  timeout -k 10 {item_timeout} python3 -m pytest $plugins -p no:cacheprovider -x -q \
      --timeout=300 --hpc-fabric=softroce --hpc-history=none hpccomm_suites/verbs {args} \
      >/tmp/log-$name 2>&1
  rc=$?
  t1=$(date +%s.%N)
  grep -E '^(FAILED|ERROR) ' /tmp/log-$name | sed "s/^/MUTANT-FAIL $name /"
  [ "$rc" -gt 1 ] && tail -n 5 /tmp/log-$name | sed "s/^/MUTANT-TAIL $name /"
  echo "MUTANT-RESULT $name $rc $(awk "BEGIN {{print $t1 - $t0}}")"
  for link in $(rdma link show 2>/dev/null | awk '{{print $2}}' | cut -d/ -f1); do
    rdma link delete "$link"  # a mutant that broke teardown must not poison the next one
  done
done
"""


def run_in_guest(mutants: list[Mutant | None], work: Path, run: int) -> list[Outcome]:
    """All verbs mutants (and the control, first) in one boot of the SoftRoCE guest."""
    build = run_job(
        ["bash", str(REPO / "ci/guest/build.sh")], timeout=1800, label="ci/guest/build.sh"
    )
    if not build.ok:
        raise SystemExit(f"cannot build the guest: {build.describe()}")
    image = build.stdout.strip().splitlines()[-1]
    root = scratch_copy(work / f"guest-{run}", None)
    names = []
    for m in mutants:
        name = m.id if m else "control-verbs"
        scratch_copy(root / "m" / name, m)
        names.append(name)
    select = DEFAULT_SELECT["verbs"]
    script = GUEST_SCRIPT.format(
        names=" ".join(names),
        item_timeout=GUEST_ITEM_TIMEOUT,
        args=" ".join(shlex.quote(a) for a in select),
    )
    results = work / f"guest-results-{run}"
    budget = (GUEST_ITEM_TIMEOUT + 30) * len(names)
    res = run_job(
        [
            "bash",
            str(root / "ci/guest/run.sh"),
            "--image",
            image,
            "--fabric",
            "softroce",
            "--results",
            str(results),
            "--timeout",
            str(budget),
            "--exec",
            script,
        ],
        timeout=budget + 300,
        label="guest catalogue",
        env={**os.environ, "HPCCOMM_GUEST_ACCEL": "tcg"},
    )
    console = (
        (results / "console.log").read_text()
        if (results / "console.log").is_file()
        else res.stdout + res.stderr
    )
    shutil.rmtree(root, ignore_errors=True)
    out = []
    for name in names:
        done = re.search(rf"^MUTANT-RESULT {re.escape(name)} (\d+) ([\d.]+)", console, re.M)
        failed = re.findall(rf"^MUTANT-FAIL {re.escape(name)} \S+ (\S+)", console, re.M)
        if done is None:
            out.append(Outcome(name, run, "error", [], 0.0, f"no result ({res.describe()})"))
            continue
        tails = re.findall(rf"^MUTANT-TAIL {re.escape(name)} (.*)$", console, re.M)
        out.append(
            judge(
                name,
                run,
                int(done[1]),
                int(done[1]) == 124,
                [f.split("/")[-1] for f in failed],
                float(done[2]),
                " ".join(tails),
            )
        )
    return out


def table(mutants: list[Mutant], outcomes: list[Outcome], runs: int) -> str:
    by = {(o.mutant, o.run): o for o in outcomes}
    lines = [
        "| mutant | defect | caught by | "
        + " | ".join(f"run {r + 1}" for r in range(runs))
        + " | time (median s) |",
        "|---|---|---|" + "---|" * runs + "---|",
    ]
    for m in mutants:
        got = [by.get((m.id, r)) for r in range(runs)]
        caught = next((o.caught_by[0] for o in got if o and o.caught_by), "-")
        times = [o.seconds for o in got if o]
        median = f"{statistics.median(times):.0f}" if times else "-"
        lines.append(
            f"| {m.id} | {m.defect} | {caught} | "
            + " | ".join(o.status if o else "-" for o in got)
            + f" | {median} |"
        )
    for r in range(runs):
        killed = sum(1 for m in mutants if (o := by.get((m.id, r))) and o.status == "killed")
        lines.append(
            f"\nrun {r + 1}: kill ratio {killed}/{len(mutants)} = "
            f"{100 * killed / max(1, len(mutants)):.0f} %"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--check", nargs="*", metavar="STACK", help="only check that the mutants apply and compile"
    )
    ap.add_argument("--stack", default=",".join(STACKS))
    ap.add_argument("--only", default="", help="comma-separated mutant ids")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--json", type=Path, help="write every outcome here")
    args = ap.parse_args(argv)

    if args.check is not None:
        mutants = load(tuple(args.check) or STACKS)
        bad = problems(mutants)
        print("\n".join(bad) or f"{len(mutants)} mutants apply and compile")
        return 1 if bad else 0

    stacks = tuple(s for s in args.stack.split(",") if s)
    unknown = set(stacks) - set(STACKS)
    if unknown:
        ap.error(f"unknown stack(s) {sorted(unknown)}: choose from {', '.join(STACKS)}")
    mutants = load(stacks)
    if args.only:
        wanted = set(args.only.split(","))
        mutants = [m for m in mutants if m.id in wanted]
        if missing := wanted - {m.id for m in mutants}:
            ap.error(f"no mutant(s) {sorted(missing)}")
    if bad := problems(mutants):
        print("\n".join(bad), file=sys.stderr)
        return 2
    outcomes: list[Outcome] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hpccomm-mutants-") as tmp:
        work = Path(tmp)
        grpc_cache = work / "grpc-cache"
        for run in range(args.runs):
            for stack in stacks:
                mine = [m for m in mutants if m.stack == stack]
                if not mine:
                    continue
                if stack == "verbs":
                    got = run_in_guest([None, *mine], work, run)
                    expect_pass(got.pop(0), stack, (), run)
                else:  # a control run of each selection first: it must pass unmutated
                    got = []
                    for select in dict.fromkeys(m.select for m in mine):
                        control = run_on_host(None, stack, work, grpc_cache, run, select)
                        expect_pass(control, stack, select, run)
                        got += [
                            run_on_host(m, stack, work, grpc_cache, run, select)
                            for m in mine
                            if m.select == select
                        ]
                for o in got:
                    print(
                        f"  {o.mutant}: {o.status} {o.caught_by[:1] or o.detail} "
                        f"({o.seconds:.0f} s)",
                        flush=True,
                    )
                outcomes += got
    print(table(mutants, outcomes, args.runs))
    print(f"\ntotal {time.monotonic() - t0:.0f} s for {args.runs} run(s)")
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
