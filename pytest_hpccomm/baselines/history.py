"""History store: one row per judged measurement per run, in SQLite, for trends and change points.

A baseline answers "is this run worse than the accepted one?"; the history answers "when did
it change?" — a slow drift never trips a per-run tolerance, but it shows up as a change point
in the series of run medians. Change points come from Apache Otava (the Hunter algorithm:
E-divisive means with a t-test merge step, Fleming et al., ICPE 2023), not a home-made detector.

Otava's wheel pins numpy==2.2 and scipy<1.17, which this project does not; its analysis modules
need only numpy and scipy, so it is installed without its dependencies:

    pip install --no-deps apache-otava

Default location: $XDG_CACHE_HOME/pytest-hpccomm/history.sqlite (~/.cache/... when unset).
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.cache import cache_dir
from pytest_hpccomm.measure.measurement import param_key

SCHEMA_VERSION = 1
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
                    "INSERT OR REPLACE INTO results VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            "results.unit, results.direction, results.fingerprint",
            system,
            fabric,
            stack,
            benchmark,
            params_key,
        )
        return [
            RunRecord(_as_datetime(t), rid, commit, med, unit, direction, _fingerprint(fp))
            for t, rid, commit, med, unit, direction, fp in rows
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


def _fingerprint(text: str) -> dict[str, Any]:
    """A stored fingerprint; a row written by hand or damaged reads as empty, not as a crash."""
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def change_points(
    values: Sequence[float],
    max_pvalue: float = 0.001,
    min_magnitude: float = 0.0,
    window_len: int = 50,
) -> list[ChangePoint]:
    """Change points of a series (Otava's compute_change_points: split + merge, Hunter).

    `max_pvalue` is the t-test threshold of Otava's merge step; `min_magnitude` drops changes
    smaller than that relative size. Series shorter than 3 points have none.
    """
    try:
        from otava.analysis import compute_change_points
    except ImportError as exc:  # not a hard dependency: see the module docstring
        raise RuntimeError(OTAVA_HINT) from exc
    if len(values) < 3:
        return []
    found, _weak = compute_change_points(
        [float(v) for v in values],
        window_len=window_len,
        max_pvalue=max_pvalue,
        min_magnitude=min_magnitude,
    )
    return [
        ChangePoint(
            index=int(cp.index),
            before=float(cp.stats.mean_1),
            after=float(cp.stats.mean_2),
            p_value=float(cp.stats.pvalue),
        )
        for cp in found
    ]
