"""Machine-readable results: our own JSON, and pytest-benchmark's export format.

Our JSON (`write_results`, schema "pytest-hpccomm/results" version 1) keeps everything: session
info, every record's raw samples (`Measurement.to_json`, so `load_results` round-trips), summary
numbers and the verdict. A record's fingerprint is written only where it differs from the
session's, so a 500-point sweep does not repeat it 500 times.

pytest-benchmark's format (`write_pytest_benchmark_json`) lets `pytest-benchmark compare FILE`,
`py.test-benchmark list` and tools built on that format (CI dashboards) read our runs. That format
has one unit, seconds per operation, and its tools assume lower is better. Mapping:

More: docs/explanation/internals.md (pytest_hpccomm.report.results_json).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from pytest_hpccomm import __version__
from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.baselines.verdict import Outcome, Verdict
from pytest_hpccomm.files import atomic_write
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.report.common import (
    iso_time,
    jsonable,
    metric_of,
    outcome_counts,
    session_fingerprint,
    sorted_results,
    summary_stats,
)
from pytest_hpccomm.report.units import is_rate_unit, is_time_unit, to_seconds

SCHEMA = "pytest-hpccomm/results"
SCHEMA_VERSION = 1
_TIMESTAMP_KEYS = ("started", "finished")


def verdict_json(v: Verdict) -> dict[str, Any]:
    # asdict, so fields the verdict engine adds later are written without touching this module
    d = dataclasses.asdict(v)
    d["outcome"] = v.outcome.value
    d["unclaimed"] = v.unclaimed.value if v.unclaimed is not None else None
    return d


def _verdict_from_json(d: Mapping[str, Any]) -> Verdict:
    known = {f.name for f in dataclasses.fields(Verdict)}
    kw = {k: v for k, v in d.items() if k in known}
    kw["outcome"] = Outcome(d["outcome"])
    if kw.get("unclaimed") is not None:
        kw["unclaimed"] = Outcome(kw["unclaimed"])
    if kw.get("current_median") is None:  # written as null when it was NaN
        kw["current_median"] = float("nan")
    return Verdict(**kw)


def results_document(results: Sequence[RunResult], session: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON document `write_results` writes, as a dict (for hooks that want to add to it)."""
    info = dict(session)
    for k in _TIMESTAMP_KEYS:
        if k in info:
            info[k] = iso_time(info[k])
    fp = session_fingerprint(results, session)
    info["fingerprint"] = fp
    fp_json = jsonable(fp)
    records = []
    for r in sorted_results(results):
        rec: dict[str, Any] = {
            "nodeid": r.nodeid,
            "system": r.system,
            "fabric": r.fabric,
            "key": r.measurement.key,
            "measurement": r.measurement.to_json(),
            "summary": summary_stats(r.measurement.samples),
            "verdict": verdict_json(r.verdict),
        }
        if jsonable(r.fingerprint) != fp_json:
            rec["fingerprint"] = dict(r.fingerprint)
        records.append(rec)
    doc = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "generator": {"name": "pytest-hpccomm", "version": __version__},
        "written": dt.datetime.now(dt.timezone.utc).isoformat(),
        "session": info,
        "counts": {o.value: n for o, n in outcome_counts(results).items()},
        "results": records,
    }
    out: dict[str, Any] = jsonable(doc)
    return out


def write_results(
    path: str | os.PathLike[str], results: Sequence[RunResult], session: Mapping[str, Any]
) -> Path:
    """Write our results JSON atomically. `session` carries system, fabric, profile, started,
    finished (datetime, epoch seconds or ISO text) and fingerprint; other keys pass through."""
    doc = results_document(results, session)
    return atomic_write(path, json.dumps(doc, indent=2, allow_nan=False) + "\n")


def load_results(path: str | os.PathLike[str]) -> tuple[list[RunResult], dict[str, Any]]:
    """Read a file written by `write_results` back into RunResults (to re-render reports)."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    if doc.get("schema") != SCHEMA or int(doc.get("schema_version", 0)) > SCHEMA_VERSION:
        raise ValueError(f"{path}: not a {SCHEMA} v{SCHEMA_VERSION} file")
    session = dict(doc["session"])
    results = [
        RunResult(
            nodeid=rec["nodeid"],
            system=rec["system"],
            fabric=rec["fabric"],
            measurement=Measurement.from_json(
                {
                    **rec["measurement"],
                    "samples": [x for x in rec["measurement"]["samples"] if x is not None],
                }
            ),
            verdict=_verdict_from_json(rec["verdict"]),
            fingerprint=rec.get("fingerprint", session.get("fingerprint") or {}),
        )
        for rec in doc["results"]
    ]
    return results, session


# --- pytest-benchmark's export format -------------------------------------------------------


def _as_seconds(m: Measurement) -> tuple[list[float], str] | None:
    """(per-sample seconds, how they were derived) or None when the unit has no such reading."""
    if is_time_unit(m.unit):
        return [to_seconds(x, m.unit) for x in m.samples], "seconds"
    if is_rate_unit(m.unit):
        if any(not (math.isfinite(x) and x > 0) for x in m.samples):
            return None
        thing = m.unit.strip()[:-2]
        return [1.0 / x for x in m.samples], f"reciprocal: seconds per {thing}"
    return None


def _unique_fullnames(results: Sequence[RunResult]) -> list[str]:
    """pytest-benchmark keys runs by fullname; one test may record a whole sweep under one
    node id, so such records get their parameters (and metric) appended to stay distinct."""
    by_node: dict[str, list[RunResult]] = {}
    for r in results:
        by_node.setdefault(r.nodeid, []).append(r)
    names: list[str] = []
    seen: set[str] = set()
    for r in results:
        name = r.nodeid
        if len(by_node[r.nodeid]) > 1:
            m = r.measurement
            params = "-".join(f"{k}={m.params[k]}" for k in sorted(m.params))
            metrics = {metric_of(x.measurement) for x in by_node[r.nodeid]}
            tag = "-".join(p for p in (metric_of(m) if len(metrics) > 1 else "", params) if p)
            # pytest's own id stays first: t.py::test[8] -> t.py::test[8-ranks=2-size=8]
            name = f"{name[:-1]}-{tag}]" if name.endswith("]") else f"{name}[{tag}]"
        base, i = name, 2
        while name in seen:
            name, i = f"{base}#{i}", i + 1
        seen.add(name)
        names.append(name)
    return names


def _bench_stats(seconds: list[float]) -> dict[str, Any]:
    # pytest-benchmark's own Stats class, so quartiles, outlier counts and ops match what its
    # fixture would have written for the same data.
    from pytest_benchmark.stats import Stats

    stats = Stats()
    for x in seconds:
        stats.update(x)
    out: dict[str, Any] = stats.as_dict()
    out["data"] = seconds
    out["iterations"] = 1  # each sample is already a per-operation value from the peer
    return out


def benchmark_document(
    results: Sequence[RunResult],
    machine_info: Mapping[str, Any] | None,
    commit_info: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], list[str]]:
    """(pytest-benchmark JSON document, node ids left out because their unit is not a time)."""
    if machine_info is None:
        from pytest_benchmark.plugin import pytest_benchmark_generate_machine_info

        machine_info = pytest_benchmark_generate_machine_info()
    if commit_info is None:
        from pytest_benchmark.utils import get_commit_info

        commit_info = get_commit_info()
    ordered = sorted_results(results)
    benches: list[dict[str, Any]] = []
    skipped: list[str] = []
    for r, fullname in zip(ordered, _unique_fullnames(ordered)):
        m, v = r.measurement, r.verdict
        conv = _as_seconds(m)
        if conv is None or not conv[0]:
            skipped.append(r.nodeid)
            continue
        seconds, stored_as = conv
        unit_note = "" if stored_as == "seconds" else f" [{m.unit} as s/{m.unit[:-2]}]"
        name = fullname.rsplit("::", 1)[-1]
        param = name[name.index("[") + 1 : -1] if name.endswith("]") and "[" in name else None
        benches.append(
            {
                "group": f"{m.stack}/{m.benchmark}/{metric_of(m)}{unit_note}",
                "name": name,
                "fullname": fullname,
                "params": dict(m.params) or None,
                "param": param,
                "extra_info": {
                    "stack": m.stack,
                    "benchmark": m.benchmark,
                    "metric": metric_of(m),
                    "unit": m.unit,
                    "direction": m.direction.value,
                    "stored_as": stored_as,
                    "median": v.current_median,
                    "baseline_median": v.baseline_median,
                    "ratio": v.ratio,
                    "verdict": v.outcome.value,
                    "p_value": v.p_value,
                    "system": r.system,
                    "fabric": r.fabric,
                    "nodeid": r.nodeid,
                    "warmup_discarded": m.warmup_discarded,
                    "measurement_extra": dict(m.extra),
                },
                "options": {
                    "timer": "pytest-hpccomm peer clock",
                    "min_rounds": len(seconds),
                    "warmup": m.warmup_discarded > 0,
                    "disable_gc": False,
                    "max_time": None,
                    "min_time": None,
                    "precision": None,
                    "confidence": None,
                },
                "stats": _bench_stats(seconds),
            }
        )
    doc = {
        "machine_info": dict(machine_info),
        "commit_info": dict(commit_info),
        "benchmarks": benches,
        "datetime": dt.datetime.now(dt.timezone.utc).isoformat(),
        "version": _pytest_benchmark_version(),
    }
    out: dict[str, Any] = jsonable(doc)
    return out, skipped


def _pytest_benchmark_version() -> str:
    from pytest_benchmark import __version__ as v

    return str(v)


def write_pytest_benchmark_json(
    path: str | os.PathLike[str],
    results: Sequence[RunResult],
    machine_info: Mapping[str, Any] | None,
    commit_info: Mapping[str, Any] | None,
) -> list[str]:
    """Write `results` in pytest-benchmark's --benchmark-json format, atomically.

    machine_info / commit_info as pytest-benchmark's hooks make them (None: generate them the
    way pytest-benchmark does). Returns the node ids left out (units that are no time or rate).
    """
    doc, skipped = benchmark_document(results, machine_info, commit_info)
    atomic_write(path, json.dumps(doc, indent=4, ensure_ascii=True, allow_nan=False) + "\n")
    return skipped


def benchmark_storage_path(
    storage: str | os.PathLike[str], save_name: str, machine_id: str | None = None
) -> Path:
    """Where `--benchmark-save=NAME` would put a run: STORAGE/<machine id>/NNNN_NAME.json, so
    `py.test-benchmark list` and `compare 0001` find runs we write there."""
    if machine_id is None:
        from pytest_benchmark.utils import get_machine_id

        machine_id = str(get_machine_id())
    folder = Path(storage) / machine_id
    nums = (
        [int(p.name[:4]) for p in folder.glob("[0-9][0-9][0-9][0-9]_*.json")]
        if folder.is_dir()
        else []
    )
    return folder / f"{max(nums, default=0) + 1:04d}_{save_name}.json"
