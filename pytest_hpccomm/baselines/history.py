"""History store: one row per judged measurement per run, in SQLite, for trends and change points.

A baseline answers "is this run worse than the accepted one?"; the history answers "when did
it change?" — a slow drift never trips a per-run tolerance, but it shows up as a change point
in the series of run medians. Change points come from Apache Otava (the Hunter algorithm:
E-divisive means with a t-test merge step, Fleming et al., ICPE 2023), not a home-made detector.

Otava's wheel pins numpy==2.2 and scipy<1.17, which this project does not; its analysis modules
need only numpy and scipy: `pip install --no-deps apache-otava`.

A paired A/B run (a nightly against a reference build) is recorded with its paired ratio, the
ratio's interval, the base's median and both sides' fingerprints: the ratio series is what
host drift cannot move (baselines/ratio_gate.py, docs/explanation/nightly-reference.md).

Default location: $XDG_CACHE_HOME/pytest-hpccomm/history.sqlite (~/.cache/... when unset).
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from pytest_hpccomm.baselines.result import PAIRED_BASE, RunResult
from pytest_hpccomm.cache import cache_dir
from pytest_hpccomm.measure.measurement import param_key

SCHEMA_VERSION = 2
# Otava searches each window of this many runs for a split: two levels of 3 runs and a run
# either side. A window as long as a month of nights (Otava's default, 50) misses a level
# that came and went within it, such as a week of a slow host.
DEFAULT_WINDOW = 8
DEFAULT_MIN_SEGMENT = 3  # runs a level needs: one odd run (or two) is no change point
# columns schema 2 added; a schema-1 database gains them in place (_migrate)
_V2_COLUMNS = (
    ("mode", "TEXT NOT NULL DEFAULT 'stored'"),  # 'stored' or 'paired' (ratio = paired ratio)
    ("ci_low", "REAL"),  # the ratio's interval
    ("ci_high", "REAL"),
    ("base_median", "REAL"),  # a paired run's base side
    ("tolerance", "REAL"),
    ("base_fingerprint", "TEXT"),  # JSON: the base implementation and what its peers know
)
OTAVA_HINT = "change points need Apache Otava: pip install --no-deps apache-otava"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id    TEXT PRIMARY KEY,
    timestamp REAL NOT NULL,          -- seconds since the epoch, UTC
    commit_id TEXT
);
CREATE TABLE IF NOT EXISTS results (
    run_id     TEXT NOT NULL REFERENCES runs(run_id),
    system     TEXT NOT NULL,
    fabric     TEXT NOT NULL,
    stack      TEXT NOT NULL,
    benchmark  TEXT NOT NULL,
    params_key TEXT NOT NULL,         -- record.param_key(params): canonical JSON
    nodeid     TEXT NOT NULL,
    metric     TEXT NOT NULL,
    unit       TEXT NOT NULL,
    direction  TEXT NOT NULL,
    n          INTEGER NOT NULL,
    median     REAL NOT NULL,
    mean       REAL NOT NULL,
    min        REAL NOT NULL,
    max        REAL NOT NULL,
    outcome    TEXT NOT NULL,
    ratio      REAL,
    fingerprint TEXT NOT NULL,        -- JSON
    mode       TEXT NOT NULL DEFAULT 'stored',
    ci_low     REAL,
    ci_high    REAL,
    base_median REAL,
    tolerance  REAL,
    base_fingerprint TEXT,
    PRIMARY KEY (run_id, system, fabric, stack, benchmark, params_key)
);
CREATE INDEX IF NOT EXISTS results_series
    ON results (system, fabric, stack, benchmark, params_key);
"""


def default_history_path() -> Path:
    return cache_dir("history.sqlite")


class SeriesPoint(NamedTuple):
    timestamp: datetime  # UTC
    run_id: str
    median: float
    unit: str


class RunRecord(NamedTuple):
    """One point of a series with what the trends page needs about its run."""

    timestamp: datetime  # UTC
    run_id: str
    commit: str | None
    median: float
    unit: str
    direction: str  # Direction value: "lower" or "higher" is better
    fingerprint: dict[str, Any]
    mode: str = "stored"  # "paired": a run against a base build in the same session
    ratio: float | None = None  # paired: candidate / base (stored: against the baseline)
    ci_low: float | None = None
    ci_high: float | None = None
    base_median: float | None = None
    base_fingerprint: dict[str, Any] | None = None
    tolerance: float | None = None  # the verdict's band

    @property
    def has_ratio(self) -> bool:
        """A point of a ratio series: a paired run with a usable ratio."""
        return self.mode == "paired" and self.ratio is not None and self.ratio > 0


class SeriesKey(NamedTuple):
    system: str
    fabric: str
    stack: str
    benchmark: str
    params_key: str
    runs: int  # how many runs recorded it
    last: datetime


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first point of the new level in the series
    before: float  # mean of the segment before
    after: float  # mean of the segment after
    p_value: float

    @property
    def rel_change(self) -> float:
        return self.after / self.before - 1.0 if self.before else math.inf


def _epoch(ts: datetime | float) -> float:
    if isinstance(ts, datetime):
        if ts.tzinfo is None:
            raise ValueError("timestamp must be timezone-aware (use UTC)")
        return ts.timestamp()
    return float(ts)


def _as_datetime(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=timezone.utc)


class HistoryStore:
    """SQLite history; every call opens its own connection, so one store serves many processes."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_history_path()

    def _connect(self, create: bool) -> sqlite3.Connection:
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        elif not self.path.exists():
            raise FileNotFoundError(f"no history database at {self.path}")
        conn = sqlite3.connect(self.path, timeout=30.0)  # waits out concurrent writers
        if create:
            conn.executescript(_SCHEMA)
            conn.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            conn.commit()
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if version is not None and version[0] == "1":
            _migrate(conn)
            version = (str(SCHEMA_VERSION),)
        if version is None or int(version[0]) != SCHEMA_VERSION:
            conn.close()
            raise RuntimeError(
                f"history database {self.path} has schema {version and version[0]!r}, "
                f"expected {SCHEMA_VERSION}"
            )
        return conn

    def append(
        self,
        results: Iterable[RunResult],
        run_id: str,
        timestamp: datetime | float,
        commit: str | None = None,
    ) -> int:
        """Record one run's results; re-appending the same run_id replaces its rows.

        Returns the number of results written.
        """
        ts = _epoch(timestamp)
        rows = []
        for r in results:
            m = r.measurement
            x = np.asarray(m.samples, dtype=np.float64)
            if x.size == 0:
                continue
            rows.append(
                (
                    run_id,
                    r.system,
                    r.fabric,
                    m.stack,
                    m.benchmark,
                    param_key(m.params),
                    r.nodeid,
                    m.metric,
                    m.unit,
                    m.direction.value,
                    int(x.size),
                    float(np.median(x)),
                    float(np.mean(x)),
                    float(np.min(x)),
                    float(np.max(x)),
                    r.verdict.outcome.value,
                    r.verdict.ratio,
                    json.dumps(dict(r.fingerprint), sort_keys=True, default=str),
                    *_paired_columns(r),
                )
            )
        conn = self._connect(create=True)
        try:
            with conn:  # one transaction: a run is recorded whole or not at all
                conn.execute(
                    "INSERT OR REPLACE INTO runs (run_id, timestamp, commit_id) VALUES (?, ?, ?)",
                    (run_id, ts, commit),
                )
                conn.executemany(
                    f"INSERT OR REPLACE INTO results ({_COLUMNS}) VALUES "
                    f"({', '.join('?' * len(_COLUMNS.split(',')))})",
                    rows,
                )
        finally:
            conn.close()
        return len(rows)

    def _of_key(
        self, columns: str, system: str, fabric: str, stack: str, benchmark: str, params_key: str
    ) -> list[tuple[Any, ...]]:
        """`columns` of every result of one key with its run, oldest first (ties: run_id)."""
        conn = self._connect(create=False)
        try:
            return conn.execute(
                f"SELECT {columns} FROM results JOIN runs USING (run_id) "
                "WHERE system = ? AND fabric = ? AND stack = ? AND benchmark = ? "
                "AND params_key = ? ORDER BY runs.timestamp, results.run_id",
                (system, fabric, stack, benchmark, params_key),
            ).fetchall()
        finally:
            conn.close()

    def series(
        self, system: str, fabric: str, stack: str, benchmark: str, params_key: str
    ) -> list[SeriesPoint]:
        """Run medians of one key, oldest first (ties broken by run_id)."""
        rows = self._of_key(
            "runs.timestamp, results.run_id, results.median, results.unit",
            system,
            fabric,
            stack,
            benchmark,
            params_key,
        )
        return [SeriesPoint(_as_datetime(t), rid, med, unit) for t, rid, med, unit in rows]

    def records(
        self, system: str, fabric: str, stack: str, benchmark: str, params_key: str
    ) -> list[RunRecord]:
        """As series(), with each run's commit, the direction and the result's fingerprint."""
        rows = self._of_key(
            "runs.timestamp, results.run_id, runs.commit_id, results.median, "
            "results.unit, results.direction, results.fingerprint, results.mode, "
            "results.ratio, results.ci_low, results.ci_high, results.base_median, "
            "results.base_fingerprint, results.tolerance",
            system,
            fabric,
            stack,
            benchmark,
            params_key,
        )
        return [_record(*row) for row in rows]

    def ratio_records(
        self, system: str, fabric: str, stack: str, benchmark: str, params_key: str
    ) -> list[RunRecord]:
        """The paired runs of one key (its ratio series), oldest first."""
        return [
            r for r in self.records(system, fabric, stack, benchmark, params_key) if r.has_ratio
        ]

    def commits(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        conn = self._connect(create=False)
        try:
            out: dict[str, str | None] = {}
            for rid in run_ids:
                row = conn.execute("SELECT commit_id FROM runs WHERE run_id = ?", (rid,)).fetchone()
                out[rid] = None if row is None else row[0]
            return out
        finally:
            conn.close()

    def keys(
        self,
        system: str | None = None,
        fabric: str | None = None,
        stack: str | None = None,
        benchmark: str | None = None,
        params_key: str | None = None,
    ) -> list[SeriesKey]:
        """The recorded series, optionally filtered; sorted by key."""
        where, args = [], []
        for col, val in (
            ("system", system),
            ("fabric", fabric),
            ("stack", stack),
            ("benchmark", benchmark),
            ("params_key", params_key),
        ):
            if val is not None:
                where.append(f"{col} = ?")
                args.append(val)
        sql = (
            "SELECT system, fabric, stack, benchmark, params_key, COUNT(*), MAX(runs.timestamp) "
            "FROM results JOIN runs USING (run_id)"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " GROUP BY system, fabric, stack, benchmark, params_key"
            " ORDER BY system, fabric, stack, benchmark, params_key"
        )
        conn = self._connect(create=False)
        try:
            return [
                SeriesKey(s, f, st, b, pk, int(n), _as_datetime(last))
                for s, f, st, b, pk, n, last in conn.execute(sql, args)
            ]
        finally:
            conn.close()


_COLUMNS = (
    "run_id, system, fabric, stack, benchmark, params_key, nodeid, metric, unit, direction, "
    "n, median, mean, min, max, outcome, ratio, fingerprint, mode, ci_low, ci_high, "
    "base_median, tolerance, base_fingerprint"
)


def _migrate(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2 in one exclusive transaction: the added columns, then the version (a
    concurrent process that migrated first leaves nothing to do)."""
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is not None and row[0] == "1":
            have = {c[1] for c in conn.execute("PRAGMA table_info(results)")}
            for name, decl in _V2_COLUMNS:
                if name not in have:
                    conn.execute(f"ALTER TABLE results ADD COLUMN {name} {decl}")
            conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),)
            )


def _paired_columns(r: RunResult) -> tuple[Any, ...]:
    """(mode, ci_low, ci_high, base_median, tolerance, base_fingerprint) of one result."""
    v = r.verdict
    base = r.measurement.extra.get(PAIRED_BASE)
    if not isinstance(base, Mapping):
        return ("stored", v.ci_low, v.ci_high, v.baseline_median, v.tolerance, None)
    fp = {"implementation": base.get("implementation"), **dict(base.get("fingerprint") or {})}
    return (
        "paired",
        v.ci_low,
        v.ci_high,
        v.baseline_median,
        v.tolerance,
        json.dumps(fp, sort_keys=True, default=str),
    )


def _record(
    t: float,
    run_id: str,
    commit: str | None,
    median: float,
    unit: str,
    direction: str,
    fingerprint: str,
    mode: str,
    *paired: Any,
) -> RunRecord:
    """A RunRecord from a row of records()' columns (the paired ones in RunRecord's order)."""
    ratio, low, high, base_median, base_fp, tolerance = paired
    return RunRecord(
        _as_datetime(t),
        run_id,
        commit,
        median,
        unit,
        direction,
        _fingerprint(fingerprint),
        mode,
        ratio,
        low,
        high,
        base_median,
        None if base_fp is None else _fingerprint(base_fp),
        tolerance,
    )


def _fingerprint(text: str) -> dict[str, Any]:
    """A stored fingerprint; a row written by hand or damaged reads as empty, not as a crash."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _long_levels(weak: list[Any], ys: Sequence[float], min_segment: int) -> list[Any]:
    """Otava's weak change points (its split step's) reduced to those that separate levels of
    at least `min_segment` runs, their t tests measured again between the levels left.

    This runs before Otava's merge step, which tests each point between its neighbours: a
    spurious point beside a real one (two nearly equal runs make a level of almost no spread,
    against which a third run is "significant") leaves the real one tested against a level of
    one run, and the merge drops it, then the spurious one: a 4x step went unseen. So while a
    level is short, one point bounding it goes: at an end of the series the only one; between
    two points, the one whose absence leaves the other's test the stronger."""
    from otava.analysis import TTestSignificanceTester

    tester = TTestSignificanceTester(1.0)

    def tested(cps: list[Any]) -> list[Any]:
        intervals = tester.get_intervals(cps)
        return [tester.change_point(cp.to_candidate(), ys, intervals) for cp in cps]

    def other_left(cps: list[Any], drop: int, other: int) -> tuple[float, float]:
        kept = tested([cp for cp in cps if int(cp.index) != drop])
        cp = next(cp for cp in kept if int(cp.index) == other)
        return float(cp.stats.pvalue), -abs(float(cp.stats.mean_2 - cp.stats.mean_1))

    cps = tested(sorted(weak, key=lambda cp: int(cp.index)))
    while cps:
        cuts = [int(cp.index) for cp in cps]
        bounds = [0, *cuts, len(ys)]
        short = [k for k in range(len(bounds) - 1) if bounds[k + 1] - bounds[k] < min_segment]
        if not short:
            break
        if short[0] == 0 or short[-1] == len(cuts):  # a short level at an end of the series
            drop = cuts[0] if short[0] == 0 else cuts[-1]
        else:  # segment k lies between cuts[k - 1] and cuts[k]
            a, b = cuts[short[0] - 1], cuts[short[0]]
            drop = a if other_left(cps, a, b) < other_left(cps, b, a) else b
        cps = tested([cp for cp in cps if int(cp.index) != drop])
    return cps


def change_points(
    values: Sequence[float],
    max_pvalue: float = 0.001,
    min_magnitude: float = 0.0,
    window_len: int = DEFAULT_WINDOW,
    min_segment: int = DEFAULT_MIN_SEGMENT,
    log_scale: bool = False,
) -> list[ChangePoint]:
    """Change points of a series (Otava's compute_change_points: split + merge, Hunter), each
    between levels of at least `min_segment` runs; before/after are those levels' means.

    `max_pvalue` is the t-test threshold of Otava's merge step; `min_magnitude` drops changes
    smaller than that relative size. Series shorter than 3 points have none.

    `log_scale`: find them on the logs of positive values (timings and rates, whose spread
    grows with their level: on the raw scale a large step widens its own level and the t test
    loses it); before/after are then the levels' geometric means, and `min_magnitude` applies
    to their ratio.
    """
    try:
        from otava.analysis import merge, split
    except ImportError as exc:  # not a hard dependency: see the module docstring
        raise RuntimeError(OTAVA_HINT) from exc
    if len(values) < 3:
        return []
    xs = [float(v) for v in values]
    if log_scale and min(xs) <= 0.0:
        raise ValueError(f"log-scale change points need positive values, got {min(xs)}")
    ys = np.log(xs).tolist() if log_scale else xs
    # Otava's split step at its first-pass threshold (as compute_change_points sets it, whose
    # merge step deletes from the weak list it returns), then its merge on long enough levels
    first_pass = (
        max_pvalue * 10 if max_pvalue < 0.05 else max_pvalue * 2 if max_pvalue < 0.5 else max_pvalue
    )
    weak = split(ys, window_len, first_pass)
    found = merge(
        _long_levels(weak, ys, min_segment),
        ys,
        max_pvalue,
        # on logs Otava's relative magnitude (of mean logs) means nothing: applied below
        0.0 if log_scale else min_magnitude,
    )
    p_of = {int(cp.index): float(cp.stats.pvalue) for cp in found}

    def level(a: int, b: int) -> float:
        return float(np.exp(np.mean(ys[a:b]))) if log_scale else float(np.mean(xs[a:b]))

    cuts = sorted(p_of)
    while log_scale and min_magnitude > 0.0:
        bounds = [0, *cuts, len(xs)]
        small = [
            i
            for k, i in enumerate(cuts)
            if abs(level(i, bounds[k + 2]) / level(bounds[k], i) - 1.0) < min_magnitude
        ]
        if not small:
            break
        cuts = [i for i in cuts if i != small[0]]  # drop one, then re-measure its neighbours
    bounds = [0, *cuts, len(xs)]
    return [
        ChangePoint(
            index=i,
            before=level(bounds[k], i),
            after=level(i, bounds[k + 2]),
            p_value=p_of[i],
        )
        for k, i in enumerate(cuts)
    ]
