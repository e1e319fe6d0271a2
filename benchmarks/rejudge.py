"""Judge a recorded session again against a baseline set, at other tolerances: the stored rule's
false alarms on real sessions (a later session of the same code against the set's earlier ones).

Not a test: a script. It reads the session's results JSON (--hpc-results: every point's samples
and job sizes) and the set's stack files as they were before that session updated them, and runs
the shipped rule (verdict.judge with the family's typical spread between sessions, as
judging.py does; the host probe's shift is left at 1: pass --host-shift to apply one).

    .venv/bin/python benchmarks/rejudge.py --baselines DIR --system ci-2c --fabric ethernet \
        --results results/results.json --tolerance 0.05 --tolerance 0.15
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from pytest_hpccomm.baselines import verdict as rule
from pytest_hpccomm.baselines.store import BaselineEntry, JsonBaselineStore
from pytest_hpccomm.measure.measurement import Direction, Measurement


def measurement(doc: dict[str, Any]) -> Measurement:
    return Measurement(
        stack=doc["stack"],
        benchmark=doc["benchmark"],
        params=doc["params"],
        samples=tuple(doc["samples"]),
        unit=doc["unit"],
        direction=Direction(doc["direction"]),
        warmup_discarded=doc.get("warmup_discarded", 0),
        metric=doc.get("metric", ""),
        tolerance=doc.get("tolerance"),
        extra=doc.get("extra") or {},
    )


def families(entries: dict[str, BaselineEntry]) -> dict[tuple[str, str], float | None]:
    levels: dict[tuple[str, str], list[tuple[float, ...]]] = defaultdict(list)
    for e in entries.values():
        levels[(e.benchmark, e.metric)].append(e.session_medians)
    return {f: rule.typical_sessions_sd(v) for f, v in levels.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baselines", type=Path, required=True)
    ap.add_argument("--system", required=True)
    ap.add_argument("--fabric", default="ethernet")
    ap.add_argument("--results", type=Path, required=True)
    ap.add_argument("--tolerance", type=float, action="append", required=True)
    ap.add_argument("--host-shift", type=float, default=1.0)
    args = ap.parse_args()
    store = JsonBaselineStore(args.baselines)
    doc = json.loads(args.results.read_text())
    loaded: dict[str, dict[str, BaselineEntry]] = {}
    fams: dict[str, dict[tuple[str, str], float | None]] = {}
    print(
        "| tolerance | stack | points judged | sessions in the set | regression | "
        "improvement | pass | inconclusive |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for tol in args.tolerance:
        counts: dict[str, Counter[str]] = defaultdict(Counter)
        sessions: dict[str, Counter[int]] = defaultdict(Counter)
        for r in doc["results"]:
            m = measurement(r["measurement"])
            if "function only" in (r["verdict"].get("reason") or ""):
                continue
            if m.stack not in loaded:
                loaded[m.stack] = store.load(args.system, args.fabric, m.stack)
                fams[m.stack] = families(loaded[m.stack])
            entry = loaded[m.stack].get(m.key)
            if entry is None:
                continue
            sd = fams[m.stack].get((m.benchmark, m.metric))
            v = rule.judge(
                m, entry, tolerance=tol, family_sd=sd, host_shift=args.host_shift, n_resamples=500
            )
            counts[m.stack][v.outcome.value] += 1
            sessions[m.stack][len(entry.session_medians)] += 1
        for stack in sorted(counts):
            c = counts[stack]
            k = ", ".join(f"{n}: {p}" for n, p in sorted(sessions[stack].items()))
            print(
                f"| {tol:g} | {stack} | {sum(c.values())} | {k} | {c['regression']} | "
                f"{c['improvement']} | {c['pass']} | {c['inconclusive']} |"
            )


if __name__ == "__main__":
    main()
