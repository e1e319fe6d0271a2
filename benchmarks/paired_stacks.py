"""Paired A/B on Horovod and TensorFlow: false alarms, detection and cost on this machine.

Not a test: a script. Each (stack, condition, session) is one real paired pytest session of
the stack's suite, `--hpc-ab-rounds` rounds (default 20, the option's default), both sides
`build` (two environments of the same build: A vs A) unless --base/--candidate name others.
A condition is a canary factor on the candidate (1.0: A vs A, the false-alarm condition; 1.05,
1.10: the candidate slowed by 5 % and 10 %). Prints, per stack and condition, each session's
verdict and paired ratio per point, and the wall time per session.

    .venv/bin/python benchmarks/paired_stacks.py [--stacks horovod,tf] [--factors 1.0,1.05,1.10]
        [--sessions 3] [--rounds 20] [--base build] [--candidate build] [--dump out.json]

The points: Horovod's synthetic training benchmark (small_cnn, gloo, images/s per rank; its
timeline points are reported but are not stretched by the canary), TensorFlow's RecvTensor at
64 KiB (latency and bandwidth).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import paired_session  # benchmarks/paired_session.py (scripts run from benchmarks/)

from hpccomm_suites import DIR as SUITES_DIR

SELECT = {
    "horovod": (
        SUITES_DIR / "horovod" / "test_perf_horovod.py",
        ["-k", "test_hvd_synthetic_benchmark", "--hpc-horovod-controllers=gloo"],
    ),
    "tf": (SUITES_DIR / "tf" / "test_perf_tf.py", ["-k", "test_tf_recv_tensor", "--hpc-sizes=64K"]),
}


def session(stack: str, factor: float, args: argparse.Namespace) -> dict[str, Any]:
    suite, select = SELECT[stack]
    results, seconds = paired_session.run(
        suite,
        select,
        stack,
        args.base,
        args.candidate,
        rounds=args.rounds,
        factor=factor,
        timeout=3600,
    )
    points = [
        {
            "point": f"{r['measurement']['benchmark']}:{r['measurement']['metric']}",
            "outcome": r["verdict"]["outcome"],
            "ratio": r["verdict"]["ratio"],
            "ci": [r["verdict"]["ci_low"], r["verdict"]["ci_high"]],
            "reason": r["verdict"].get("reason"),
        }
        for r in results
    ]
    return {"stack": stack, "factor": factor, "seconds": round(seconds, 1), "points": points}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--stacks", default="horovod,tf")
    ap.add_argument("--factors", default="1.0,1.05,1.10")
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--base", default="build")
    ap.add_argument("--candidate", default="build")
    ap.add_argument("--dump", type=Path)
    args = ap.parse_args()
    runs = []
    for i in range(args.sessions):  # sessions interleaved over conditions: drift spreads evenly
        for stack in args.stacks.split(","):
            for factor in (float(f) for f in args.factors.split(",")):
                got = session(stack, factor, args)
                runs.append(got)
                cells = ", ".join(
                    f"{p['point']} {p['outcome']} {p['ratio'] and round(p['ratio'], 3)}"
                    for p in got["points"]
                )
                print(f"session {i + 1} {stack} x{factor}: {got['seconds']} s: {cells}", flush=True)
                if args.dump:
                    args.dump.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
