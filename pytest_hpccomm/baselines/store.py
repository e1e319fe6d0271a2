"""Baseline store: one reviewable JSON file per (system, fabric, stack).

Layout: ``<root>/<system>/<fabric>/<stack>.json``, keys sorted and indented so a baseline
update reads as a small diff in review. Each entry keeps (up to MAX_STORED_SAMPLES of) the raw
samples, because the verdict engine re-tests new runs against them with rank tests; summary
numbers are kept only for humans and plots.

Writers serialize on an exclusive ``fcntl.flock`` of a hidden sibling ``.<stack>.json.lock``
file (never removed: unlinking a lock file races with its next holder) and replace the
file atomically (temp file in the same directory, fsync, ``os.replace``, fsync of the
directory): concurrent updaters (pytest-xdist workers, parallel CI jobs on a shared filesystem
that honours flock) lose nothing, and a writer killed at any point leaves the previous file.

More: docs/explanation/internals.md (pytest_hpccomm.baselines.store).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol

import numpy as np

from pytest_hpccomm.files import atomic_write, updating
from pytest_hpccomm.measure.measurement import Direction, Measurement, Param
from pytest_hpccomm.measure.stats import block_length, summarize

SCHEMA = "pytest-hpccomm/baseline"
SCHEMA_VERSION = 1
MAX_STORED_SAMPLES = 200  # plenty for Mann-Whitney / bootstrap; keeps files reviewable
MAX_SESSIONS = 5  # enough runs for a spread, recent enough to follow the machine as it ages


class BaselineFileError(Exception):
    """A baseline file exists but is unreadable, not JSON, or not our schema."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"baseline file {path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True)
class BaselineEntry:
    """What the store keeps for one Measurement.key."""

    key: str
    benchmark: str
    params: Mapping[str, Param]
    samples: tuple[float, ...]  # at most MAX_STORED_SAMPLES, evenly spaced over the run
    n_samples: int  # how many the run had before thinning
    unit: str
    direction: Direction
    tolerance: float | None
    timestamp: str  # ISO 8601, UTC
    fingerprint: Mapping[str, Any]
    summary: Mapping[str, Any]  # Summary.to_json() of all samples of that run
    metric: str = ""
    job_sizes: tuple[int, ...] | None = None  # stored samples per pooled job, in job order
    # (timestamp, median) of each run that updated this entry, oldest first, this one last
    sessions: tuple[tuple[str, float], ...] = ()

    @property
    def median(self) -> float:
        """Median of all the run's samples (the stored ones may be thinned)."""
        med = self.summary.get("median")
        return float(med) if med is not None else float(np.median(self.samples))

    @property
    def levels(self) -> tuple[tuple[str, float], ...]:
        """The sessions, or this run alone for an entry written before they were kept."""
        return self.sessions or ((self.timestamp, self.median),)

    @property
    def session_medians(self) -> tuple[float, ...]:
        return tuple(m for _, m in self.levels)

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "params": dict(self.params),
            "metric": self.metric,
            "unit": self.unit,
            "direction": self.direction.value,
            "tolerance": self.tolerance,
            "timestamp": self.timestamp,
            "n_samples": self.n_samples,
            "samples": list(self.samples),
            "summary": dict(self.summary),
            "fingerprint": dict(self.fingerprint),
            **({"job_sizes": list(self.job_sizes)} if self.job_sizes else {}),
            **(
                {"sessions": [{"timestamp": t, "median": m} for t, m in self.sessions]}
                if self.sessions
                else {}
            ),
        }

    @classmethod
    def from_json(cls, key: str, data: Any) -> BaselineEntry:
        """Parse one entry; raises ValueError naming the offending field."""
        if not isinstance(data, dict):
            raise ValueError(f"entry {key!r} is not an object")
        missing = [f for f in _REQUIRED_ENTRY_FIELDS if f not in data]
        if missing:
            raise ValueError(f"entry {key!r} lacks field(s) {', '.join(missing)}")
        try:
            samples = tuple(float(x) for x in data["samples"])
            direction = Direction(data["direction"])
            tol = data["tolerance"]
            entry = cls(
                key=key,
                benchmark=str(data["benchmark"]),
                params=dict(data["params"]),
                samples=samples,
                n_samples=int(data["n_samples"]),
                unit=str(data["unit"]),
                direction=direction,
                tolerance=None if tol is None else float(tol),
                timestamp=str(data["timestamp"]),
                fingerprint=dict(data["fingerprint"]),
                summary=dict(data["summary"]),
                metric=str(data.get("metric", "")),
                job_sizes=None
                if data.get("job_sizes") is None
                else tuple(int(k) for k in data["job_sizes"]),
                sessions=tuple(
                    (str(x["timestamp"]), float(x["median"])) for x in data.get("sessions") or ()
                ),
            )
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(f"entry {key!r} has a bad value: {exc}") from None
        if not samples or not all(math.isfinite(x) for x in samples):
            raise ValueError(f"entry {key!r} needs at least one finite sample")
        if entry.job_sizes is not None and (
            sum(entry.job_sizes) != len(samples) or min(entry.job_sizes, default=0) < 1
        ):
            raise ValueError(
                f"entry {key!r}: job_sizes {list(entry.job_sizes)} do not split "
                f"its {len(samples)} samples"
            )
        if not all(math.isfinite(m) for _, m in entry.sessions):
            raise ValueError(f"entry {key!r}: a session median is not a finite number")
        return entry


_REQUIRED_ENTRY_FIELDS = (
    "benchmark",
    "params",
    "unit",
    "direction",
    "tolerance",
    "timestamp",
    "n_samples",
    "samples",
    "summary",
    "fingerprint",
)


def thin(samples: tuple[float, ...], limit: int = MAX_STORED_SAMPLES) -> tuple[float, ...]:
    """At most `limit` samples as whole runs of consecutive batches (the verdict's bootstrap
    blocks), the runs evenly spaced over the series so drift stays visible: single batches
    picked far apart would hide the autocorrelation the block bootstrap accounts for."""
    if len(samples) <= limit:
        return samples
    b = block_length(limit)
    starts = np.linspace(0, len(samples) - b, limit // b).round().astype(int)
    return tuple(samples[i] for start in starts for i in range(start, start + b))


def thin_jobs(
    samples: tuple[float, ...], sizes: list[int] | None, limit: int = MAX_STORED_SAMPLES
) -> tuple[tuple[float, ...], tuple[int, ...] | None]:
    """(samples, job sizes) with at most `limit` samples: every pooled job keeps its share,
    thinned within itself (thin), so jobs stay units the verdict can resample."""
    if not sizes or sum(sizes) != len(samples):
        return thin(samples, limit), None
    share = max(1, limit // len(sizes))
    out: list[tuple[float, ...]] = []
    at = 0
    for k in sizes:
        out.append(thin(samples[at : at + k], share))
        at += k
    return tuple(x for part in out for x in part), tuple(len(part) for part in out)


def entry_from_measurement(
    m: Measurement,
    fingerprint: Mapping[str, Any],
    timestamp: str,
    max_samples: int = MAX_STORED_SAMPLES,
) -> BaselineEntry:
    samples, job_sizes = thin_jobs(
        tuple(float(x) for x in m.samples), m.extra.get("job_sizes"), max_samples
    )
    summary = summarize(m.samples)
    return BaselineEntry(
        key=m.key,
        benchmark=m.benchmark,
        params=dict(sorted(m.params.items())),
        samples=samples,
        n_samples=len(m.samples),
        unit=m.unit,
        direction=m.direction,
        tolerance=m.tolerance,
        timestamp=timestamp,
        fingerprint=dict(fingerprint),
        summary={
            **summary.to_json(),
            **({"cores_shared": why} if (why := shared_cores(m.extra)) else {}),
        },
        metric=m.metric,
        job_sizes=job_sizes,
        sessions=((timestamp, summary.median),),
    )


def carry_sessions(
    old: BaselineEntry | None, new: BaselineEntry, limit: int = MAX_SESSIONS
) -> BaselineEntry:
    """`new` with the sessions of the entry it replaces, when both measured the same thing on
    the same kind of run: same unit, direction and relevant fingerprint (fingerprint_diff).
    A run on shared cores (`=all` writes it, marked) adds no session: a neighbour's load moves
    a point either way (gRPC's small-message latency ran 0.4-0.5x its quiet level beside a
    test run that kept the cores awake), which is no spread of the build's own."""
    if (
        old is None
        or old.unit != new.unit
        or old.direction != new.direction
        or fingerprint_diff(old.fingerprint, new.fingerprint)
    ):
        return new
    added = () if shared_cores(new.summary) else new.levels
    return replace(new, sessions=(old.levels + added)[-limit:])


def shared_cores(extra: Mapping[str, Any]) -> str:
    """The contention guard's reason recorded with a measurement (its `extra`) or a baseline
    entry (its `summary`): "" when the job had the cores to itself or nobody measured."""
    if "cores_shared" in extra:
        return str(extra["cores_shared"])
    cpu = extra.get("cpu")
    return str(cpu.get("disturbed", "")) if isinstance(cpu, Mapping) else ""


class BaselineStore(Protocol):
    def path(self, system: str, fabric: str, stack: str) -> Path:
        """Where one stack's baselines live (named in the session summary)."""
        ...

    def host_file(self, system: str, fabric: str) -> Path:
        """Where the set's sessions' reference probes live (baselines/host_probes.py)."""
        ...

    def load(self, system: str, fabric: str, stack: str) -> dict[str, BaselineEntry]: ...

    def update(
        self,
        system: str,
        fabric: str,
        stack: str,
        measurements: Iterable[Measurement],
        fingerprint: Mapping[str, Any],
        timestamp: str | None = None,
    ) -> dict[str, BaselineEntry]: ...

    def sets(self) -> list[tuple[str, str, str]]:
        """(system, fabric, stack) of every stored set, sorted (`hpccomm baselines show`)."""
        ...

    def rewrite(
        self,
        system: str,
        fabric: str,
        stack: str,
        change: Callable[[dict[str, BaselineEntry]], dict[str, BaselineEntry]],
    ) -> dict[str, BaselineEntry]:
        """Replace a set's entries by change(entries), as one atomic update (prune,
        promote); a set left empty is removed."""
        ...


def _check_component(kind: str, value: str) -> str:
    # These become path components: refuse anything that could escape `root`.
    if not value or value in {".", ".."} or "/" in value or "\\" in value or "\0" in value:
        raise ValueError(f"invalid {kind} name for a baseline path: {value!r}")
    return value


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class JsonBaselineStore:
    root: Path
    max_samples: int = field(default=MAX_STORED_SAMPLES)
    max_sessions: int = field(default=MAX_SESSIONS)

    def _set_dir(self, system: str, fabric: str) -> Path:
        return (
            Path(self.root)
            / _check_component("system", system)
            / _check_component("fabric", fabric)
        )

    def path(self, system: str, fabric: str, stack: str) -> Path:
        return self._set_dir(system, fabric) / f"{_check_component('stack', stack)}.json"

    def host_file(self, system: str, fabric: str) -> Path:
        return self._set_dir(system, fabric) / "host-probes.json"

    def load(self, system: str, fabric: str, stack: str) -> dict[str, BaselineEntry]:
        """Entries by Measurement.key; {} if no file yet; BaselineFileError if unreadable."""
        return self._read(self.path(system, fabric, stack), system, fabric, stack)

    def update(
        self,
        system: str,
        fabric: str,
        stack: str,
        measurements: Iterable[Measurement],
        fingerprint: Mapping[str, Any],
        timestamp: str | None = None,
    ) -> dict[str, BaselineEntry]:
        """Add or replace the entries of `measurements`, each carrying the sessions of the
        entry it replaces (carry_sessions); keeps all other entries.

        Returns the file's entries after the update.
        """
        stamp = timestamp or _utc_now()
        new: dict[str, BaselineEntry] = {}
        for m in measurements:
            if m.stack != stack:
                raise ValueError(f"measurement {m.key!r} is for stack {m.stack!r}, not {stack!r}")
            new[m.key] = entry_from_measurement(m, fingerprint, stamp, self.max_samples)
        return self.rewrite(
            system,
            fabric,
            stack,
            lambda entries: {
                **entries,
                **{k: carry_sessions(entries.get(k), e, self.max_sessions) for k, e in new.items()},
            },
        )

    def sets(self) -> list[tuple[str, str, str]]:
        return sorted(
            (p.parent.parent.name, p.parent.name, p.stem)
            for p in Path(self.root).glob("*/*/*.json")
            if p.name != "host-probes.json"
        )

    def rewrite(
        self,
        system: str,
        fabric: str,
        stack: str,
        change: Callable[[dict[str, BaselineEntry]], dict[str, BaselineEntry]],
    ) -> dict[str, BaselineEntry]:
        path = self.path(system, fabric, stack)
        with updating(path):
            entries = change(self._read(path, system, fabric, stack))
            if not entries:
                path.unlink(missing_ok=True)
                return entries
            doc = {
                "schema": SCHEMA,
                "schema_version": SCHEMA_VERSION,
                "system": system,
                "fabric": fabric,
                "stack": stack,
                "entries": {k: e.to_json() for k, e in entries.items()},
            }
            text = json.dumps(doc, sort_keys=True, indent=2, allow_nan=False) + "\n"
            atomic_write(path, text, mode=0o644)  # shared, reviewed files
        return entries

    def _read(self, path: Path, system: str, fabric: str, stack: str) -> dict[str, BaselineEntry]:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise BaselineFileError(path, f"cannot be read: {exc}") from exc
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BaselineFileError(path, f"is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise BaselineFileError(path, "top level is not a JSON object")
        if doc.get("schema") != SCHEMA:
            raise BaselineFileError(path, f"schema is {doc.get('schema')!r}, expected {SCHEMA!r}")
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise BaselineFileError(
                path,
                f"schema_version is {doc.get('schema_version')!r}; this version of "
                f"pytest-hpccomm reads {SCHEMA_VERSION}",
            )
        for name, want in (("system", system), ("fabric", fabric), ("stack", stack)):
            if doc.get(name) != want:
                raise BaselineFileError(path, f"{name} is {doc.get(name)!r}, expected {want!r}")
        raw = doc.get("entries")
        if not isinstance(raw, dict):
            raise BaselineFileError(path, "'entries' is missing or not an object")
        entries: dict[str, BaselineEntry] = {}
        for key, data in raw.items():
            try:
                entries[key] = BaselineEntry.from_json(key, data)
            except ValueError as exc:
                raise BaselineFileError(path, str(exc)) from None
        return entries


# Fingerprint fields whose change makes an old baseline incomparable. A flattened dotted key
# ("stacks.mpi.version", "link_rate_gbps") is relevant when one of its components, or one of
# the "_"-separated words of a component, is listed here.
FINGERPRINT_FIELDS = frozenset(
    {
        "device",
        "devices",
        "hca",
        "rate",
        "speed",
        "link_layer",
        "mtu",
        "firmware",
        "fw",
        "driver",
        "mpi",
        "vendor",
        "version",
        "versions",
        "kernel",
        "os",
        "arch",
        "cpu",
        "model",
        "cores",
        "numa",
        "python",
        "stack",
        "stacks",
        "launcher",
        "nodes",
        "ranks",
        "pytest_hpccomm",
        "ipoib_mode",
    }
)
# Change between runs on one system without making baselines incomparable (last component).
VOLATILE_FIELDS = frozenset(
    {"hostname", "host", "timestamp", "time", "date", "pid", "uptime", "load", "mhz", "boot_id"}
)


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _words(component: str) -> set[str]:
    return {component, *component.split("_")}


def fingerprint_diff(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    fields: Iterable[str] | None = None,
) -> list[tuple[str, Any, Any]]:
    """(dotted field, old value, new value) for each relevant field that differs, sorted.

    Nested dicts are flattened to dotted keys; a field absent on one side shows as None.
    Relevance: see FINGERPRINT_FIELDS (or pass `fields`); volatile fields (hostname, cpu MHz,
    ...) never count.
    """
    wanted = {f.lower() for f in (FINGERPRINT_FIELDS if fields is None else fields)}
    a, b = _flatten(old), _flatten(new)
    diffs: list[tuple[str, Any, Any]] = []
    for key in sorted(set(a) | set(b)):
        parts = key.lower().split(".")
        if _words(parts[-1]) & VOLATILE_FIELDS:
            continue
        if not any(_words(p) & wanted for p in parts):
            continue
        if a.get(key) != b.get(key):
            diffs.append((key, a.get(key), b.get(key)))
    return diffs
