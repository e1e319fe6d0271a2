"""Horovod training requests with loopback ranks pinned one per core, and unpinned.

Not a test: a script. It starts the suite's Horovod peers (2 loopback ranks, the cached build)
and sends plain training requests of the canary test's shape, one after another. Per request it
prints a JSON line: the median images/s per rank, each iteration's rate, and for each thread of
each rank the CPU it was on before and after, the time it ran and waited (schedstat) and its
context switches. At the end: the median of the requests and how many ran below 0.6x and
0.8x of it.

    .venv/bin/python benchmarks/horovod_rank_cpus.py --controller mpi --requests 100
    .venv/bin/python benchmarks/horovod_rank_cpus.py --controller mpi --requests 100 --unpinned
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from pytest_hpccomm.stacks.horovod.driver import HorovodPeers
from pytest_hpccomm.stacks.horovod.perf import TRAIN
from pytest_hpccomm.stacks.horovod.plugin import BUILD, resolve_env
from pytest_hpccomm.stacks.horovod.wire import CPUS_VAR


def threads(pid: int) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = open(f"/proc/{pid}/task/{tid}/stat").read()
            fields = stat[stat.rindex(")") + 2 :].split()
            run_ns, wait_ns = open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[:2]
            status = open(f"/proc/{pid}/task/{tid}/status").read()
        except OSError:
            continue  # the thread ended
        switches = {
            k: int(status.split(f"\n{k}_ctxt_switches:")[1].split()[0])
            for k in ("voluntary", "nonvoluntary")
        }
        out[tid] = {"cpu": int(fields[36]), "run": int(run_ns), "wait": int(wait_ns), **switches}
    return out


def delta(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Threads that ran or waited more than 5 ms between the readings."""
    out = {}
    for tid, x in b.items():
        y = a.get(tid)
        if y is None:
            continue
        d = {
            "cpu": [y["cpu"], x["cpu"]],
            "run_ms": round((x["run"] - y["run"]) / 1e6, 1),
            "wait_ms": round((x["wait"] - y["wait"]) / 1e6, 1),
            "nvol": x["nonvoluntary"] - y["nonvoluntary"],
            "vol": x["voluntary"] - y["voluntary"],
        }
        if d["run_ms"] > 5 or d["wait_ms"] > 5:
            out[tid] = d
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--controller", choices=("mpi", "gloo"), default="mpi")
    p.add_argument("--requests", type=int, default=100)
    p.add_argument("--unpinned", action="store_true", help=f"{CPUS_VAR}='' (no pinning)")
    args = p.parse_args()
    train = {"op": "train", "model": "small_cnn", **TRAIN["small_cnn"], "iters": 4}
    env = {CPUS_VAR: ""} if args.unpinned else None
    medians = []
    with HorovodPeers(resolve_env(BUILD), args.controller, "loopback", env=env) as peers:
        pids = [r.pid for r in peers.ranks]
        print(json.dumps({"ranks": [(r.rank, r.pid, r.cpus) for r in peers.ranks]}))
        for i in range(args.requests):
            before = {pid: threads(pid) for pid in pids}
            started = time.monotonic()
            replies = peers.request({**train, "slowdown": 1.0}, 300.0)
            wall = time.monotonic() - started
            after = {pid: threads(pid) for pid in pids}
            rates = [statistics.fmean(it) for it in zip(*(r["images_per_s"] for r in replies))]
            medians.append(statistics.median(rates))
            line = {
                "request": i,
                "wall_s": round(wall, 3),
                "median": round(medians[-1]),
                "rates": [round(x) for x in rates],
                "threads": {pid: delta(before[pid], after[pid]) for pid in pids},
            }
            print(json.dumps(line), flush=True)
    m = statistics.median(medians)
    print(
        f"{args.controller} {'unpinned' if args.unpinned else 'pinned'}: {len(medians)} requests,"
        f" median {m:.0f} img/s, lowest {sorted(round(x) for x in medians)[:5]},"
        f" below 0.6x: {sum(x < 0.6 * m for x in medians)},"
        f" below 0.8x: {sum(x < 0.8 * m for x in medians)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
