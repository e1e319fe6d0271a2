"""JsonBaselineStore: round trip, reviewable layout, atomicity, concurrency, malformed files."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm import files as files_mod
from pytest_hpccomm.baselines.store import (
    MAX_SESSIONS,
    MAX_STORED_SAMPLES,
    SCHEMA,
    SCHEMA_VERSION,
    BaselineFileError,
    BaselineStore,
    JsonBaselineStore,
    fingerprint_diff,
)
from pytest_hpccomm.measure.measurement import Direction
from tests.builders import FINGERPRINT, make_measurement

SYS, FAB, STACK = "epyc-64c-abc123", "ib", "mpi"


def test_is_a_baseline_store(tmp_path: Path) -> None:
    s: BaselineStore = JsonBaselineStore(tmp_path)
    assert s.load(SYS, FAB, STACK) == {}


def test_round_trip(tmp_path: Path) -> None:
    fingerprint = dict(FINGERPRINT)
    s = JsonBaselineStore(tmp_path)
    lat = make_measurement([3.1, 3.0, 3.2, 3.05, 3.0], tolerance=0.1)
    bw = make_measurement(
        [9000.0, 9100.0, 8900.0],
        benchmark="osu_bw",
        size=1 << 20,
        unit="MB/s",
        direction=Direction.HIGHER_IS_BETTER,
    )
    stamp = "2024-06-01T00:00:00+00:00"
    written = s.update(SYS, FAB, STACK, [lat, bw], fingerprint, timestamp=stamp)
    loaded = s.load(SYS, FAB, STACK)
    assert loaded == written
    assert set(loaded) == {lat.key, bw.key}
    e = loaded[lat.key]
    assert e.samples == lat.samples and e.n_samples == 5
    assert e.unit == "us" and e.direction is Direction.LOWER_IS_BETTER and e.tolerance == 0.1
    assert e.median == 3.05 and e.summary["n"] == 5 and e.summary["p95"] > 3.1
    assert e.fingerprint == fingerprint and e.timestamp == stamp
    assert e.benchmark == "osu_latency" and dict(e.params) == {"ranks": 2, "size": 8}
    assert loaded[bw.key].direction is Direction.HIGHER_IS_BETTER
    assert (tmp_path / SYS / FAB / "mpi.json").is_file()


def test_update_keeps_other_entries_and_replaces_same_key(tmp_path: Path) -> None:
    s = JsonBaselineStore(tmp_path)
    a, b = make_measurement([1.0] * 5, size=8), make_measurement([2.0] * 5, size=16)
    s.update(SYS, FAB, STACK, [a, b], FINGERPRINT)
    s.update(SYS, FAB, STACK, [make_measurement([1.5] * 5, size=8)], FINGERPRINT)
    loaded = s.load(SYS, FAB, STACK)
    assert loaded[a.key].samples == (1.5,) * 5
    assert loaded[b.key].samples == (2.0,) * 5


def test_each_update_adds_a_session_until_the_runs_differ_in_kind(tmp_path: Path) -> None:
    s = JsonBaselineStore(tmp_path)
    medians = [3.0, 3.3, 2.9, 3.1, 3.2, 3.05, 2.95]
    for day, med in enumerate(medians):
        s.update(
            SYS,
            FAB,
            STACK,
            [make_measurement([med] * 5)],
            FINGERPRINT,
            timestamp=f"2026-11-{day + 1:02d}",
        )
        e = s.load(SYS, FAB, STACK)[make_measurement([1.0]).key]
        # the newest MAX_SESSIONS runs, oldest first; the samples are the last run's
        assert e.session_medians == tuple(medians[: day + 1][-MAX_SESSIONS:])
        assert e.levels[-1] == (f"2026-11-{day + 1:02d}", med) and e.samples == (med,) * 5
    # another MPI library: the spread of the old runs says nothing about this one
    other = {**FINGERPRINT, "mpi_library": "MPICH 4.0"}
    s.update(SYS, FAB, STACK, [make_measurement([4.0] * 5)], other, timestamp="2026-12-01")
    assert s.load(SYS, FAB, STACK)[make_measurement([1.0]).key].levels == (("2026-12-01", 4.0),)
    # the unit changed: the same
    s.update(SYS, FAB, STACK, [make_measurement([4.1] * 5, unit="ms")], other, timestamp="x")
    assert s.load(SYS, FAB, STACK)[make_measurement([1.0]).key].session_medians == (4.1,)


def test_a_run_on_shared_cores_adds_no_session(tmp_path: Path) -> None:
    s = JsonBaselineStore(tmp_path)
    for day, med in enumerate([3.0, 3.1, 2.9]):
        s.update(SYS, FAB, STACK, [make_measurement([med] * 5)], FINGERPRINT, timestamp=f"d{day}")
    shared = dataclasses.replace(
        make_measurement([1.2] * 5), extra={"cpu": {"disturbed": "other processes used 0.7 of 2"}}
    )
    s.update(SYS, FAB, STACK, [shared], FINGERPRINT, timestamp="busy")
    e = s.load(SYS, FAB, STACK)[shared.key]
    # the entry holds the marked run (=all writes it), the spread only the quiet ones
    assert e.samples == (1.2,) * 5 and e.summary["cores_shared"].startswith("other processes")
    assert e.session_medians == (3.0, 3.1, 2.9)
    s.update(SYS, FAB, STACK, [make_measurement([3.05] * 5)], FINGERPRINT, timestamp="quiet")
    assert s.load(SYS, FAB, STACK)[shared.key].session_medians == (3.0, 3.1, 2.9, 3.05)


def test_an_entry_from_before_sessions_counts_as_one(tmp_path: Path) -> None:
    s = JsonBaselineStore(tmp_path)
    s.update(SYS, FAB, STACK, [make_measurement([2.0] * 5)], FINGERPRINT, timestamp="old")
    path = s.path(SYS, FAB, STACK)
    doc = json.loads(path.read_text())
    del _first(doc)["sessions"]
    path.write_text(json.dumps(doc))
    s.update(SYS, FAB, STACK, [make_measurement([2.2] * 5)], FINGERPRINT, timestamp="new")
    assert s.load(SYS, FAB, STACK)[make_measurement([1.0]).key].levels == (
        ("old", 2.0),
        ("new", 2.2),
    )


def test_file_is_stable_and_sorted(tmp_path: Path) -> None:
    ms = [make_measurement([float(i)] * 5, size=s) for i, s in enumerate([64, 8, 1024, 1])]
    one, two = JsonBaselineStore(tmp_path / "a"), JsonBaselineStore(tmp_path / "b")
    one.update(SYS, FAB, STACK, ms, FINGERPRINT, timestamp="t")
    two.update(SYS, FAB, STACK, list(reversed(ms)), FINGERPRINT, timestamp="t")
    text = one.path(SYS, FAB, STACK).read_text()
    assert text == two.path(SYS, FAB, STACK).read_text()  # order of updates does not matter
    doc = json.loads(text)
    assert doc["schema"] == SCHEMA and doc["schema_version"] == SCHEMA_VERSION
    assert list(doc["entries"]) == sorted(doc["entries"])
    assert text == json.dumps(doc, sort_keys=True, indent=2) + "\n"
    assert oct(os.stat(one.path(SYS, FAB, STACK)).st_mode & 0o777) == "0o644"


def test_many_samples_are_thinned_as_whole_blocks_spread_over_the_run(tmp_path: Path) -> None:
    m = make_measurement([float(i) for i in range(1000)])
    e = JsonBaselineStore(tmp_path).update(SYS, FAB, STACK, [m], FINGERPRINT)[m.key]
    assert MAX_STORED_SAMPLES - 6 <= len(e.samples) <= MAX_STORED_SAMPLES
    assert e.n_samples == 1000 and e.job_sizes is None
    assert e.samples[0] == 0.0 and e.samples[-1] == 999.0
    # runs of 6 consecutive batches (the bootstrap's blocks), not single batches far apart
    runs = [e.samples[i : i + 6] for i in range(0, len(e.samples), 6)]
    assert all(r == tuple(r[0] + k for k in range(6)) for r in runs)
    assert e.summary["median"] == 499.5  # summary of all samples, not of the thinned ones


def test_pooled_jobs_are_thinned_each_within_itself(tmp_path: Path) -> None:
    jobs = [[1000.0 * j + i for i in range(400)] for j in range(3)]
    m = make_measurement([x for job in jobs for x in job], job_sizes=[400, 400, 400])
    e = JsonBaselineStore(tmp_path).update(SYS, FAB, STACK, [m], FINGERPRINT)[m.key]
    assert e.job_sizes is not None and len(e.job_sizes) == 3
    assert sum(e.job_sizes) == len(e.samples) <= MAX_STORED_SAMPLES
    at = 0
    for j, k in enumerate(e.job_sizes):  # each job's part holds that job's batches only
        assert all(1000 * j <= x < 1000 * j + 400 for x in e.samples[at : at + k])
        at += k
    again = JsonBaselineStore(tmp_path).load(SYS, FAB, STACK)[m.key]
    assert again.job_sizes == e.job_sizes


def test_job_sizes_that_do_not_split_the_samples_are_a_file_error(tmp_path: Path) -> None:
    m = make_measurement([float(i) for i in range(1, 31)], job_sizes=[10, 10, 10])
    store = JsonBaselineStore(tmp_path)
    store.update(SYS, FAB, STACK, [m], FINGERPRINT)
    path = store.path(SYS, FAB, STACK)
    doc = json.loads(path.read_text())
    doc["entries"][m.key]["job_sizes"] = [10, 10]
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineFileError, match="job_sizes"):
        store.load(SYS, FAB, STACK)


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "x\0y"])
def test_path_components_cannot_escape_root(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError):
        JsonBaselineStore(tmp_path).load(bad, FAB, STACK)


def test_measurement_of_other_stack_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="for stack 'grpc'"):
        JsonBaselineStore(tmp_path).update(
            SYS, FAB, STACK, [make_measurement([1.0] * 5, stack="grpc")], FINGERPRINT
        )


# --- malformed files ---------------------------------------------------------------------


def _valid_doc(tmp_path: Path) -> dict[str, Any]:
    s = JsonBaselineStore(tmp_path)
    s.update(SYS, FAB, STACK, [make_measurement([1.0, 2.0, 3.0, 4.0, 5.0])], FINGERPRINT)
    return dict(json.loads(s.path(SYS, FAB, STACK).read_text()))


def _entry(doc: dict[str, Any]) -> dict[str, Any]:
    return dict(next(iter(doc["entries"].values())))


def _mutations() -> list[tuple[str, Any, str]]:
    def drop(field: str) -> Any:
        def f(doc: dict[str, Any]) -> None:
            del _first(doc)[field]

        return f

    def set_entry(field: str, value: Any) -> Any:
        def f(doc: dict[str, Any]) -> None:
            _first(doc)[field] = value

        return f

    def set_top(field: str, value: Any) -> Any:
        def f(doc: dict[str, Any]) -> None:
            doc[field] = value

        return f

    return [
        ("schema_version", set_top("schema_version", 99), "schema_version is 99"),
        ("schema", set_top("schema", "pytest-benchmark"), "schema is 'pytest-benchmark'"),
        ("stack", set_top("stack", "grpc"), "stack is 'grpc', expected 'mpi'"),
        ("entries", set_top("entries", []), "'entries' is missing or not an object"),
        ("samples missing", drop("samples"), "lacks field(s) samples"),
        ("direction missing", drop("direction"), "lacks field(s) direction"),
        ("bad direction", set_entry("direction", "sideways"), "bad value"),
        ("samples not numbers", set_entry("samples", ["x"]), "bad value"),
        ("no samples", set_entry("samples", []), "at least one finite sample"),
        ("entry not object", lambda d: d["entries"].update({"k": 3}), "is not an object"),
        ("session no median", set_entry("sessions", [{"timestamp": "t"}]), "bad value"),
        (
            "session median nan",
            set_entry("sessions", [{"timestamp": "t", "median": "nan"}]),
            "session median is not a finite number",
        ),
    ]


def _first(doc: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = next(iter(doc["entries"].values()))
    return entry


@pytest.mark.parametrize(("label", "mutate", "problem"), _mutations(), ids=lambda v: str(v)[:20])
def test_malformed_file_raises_naming_file_and_problem(
    tmp_path: Path, label: str, mutate: Any, problem: str
) -> None:
    doc = _valid_doc(tmp_path)
    mutate(doc)
    s = JsonBaselineStore(tmp_path)
    path = s.path(SYS, FAB, STACK)
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineFileError) as info:
        s.load(SYS, FAB, STACK)
    assert str(path) in str(info.value) and problem in str(info.value)
    # An update must refuse too, rather than overwrite what it cannot read.
    before = path.read_text()
    with pytest.raises(BaselineFileError):
        s.update(SYS, FAB, STACK, [make_measurement([1.0] * 5)], FINGERPRINT)
    assert path.read_text() == before


@pytest.mark.parametrize(
    ("text", "problem"),
    [("{not json", "not valid JSON"), ("[1, 2]", "not a JSON object"), ("", "not valid JSON")],
)
def test_unparseable_file_raises(tmp_path: Path, text: str, problem: str) -> None:
    s = JsonBaselineStore(tmp_path)
    path = s.path(SYS, FAB, STACK)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(BaselineFileError, match=problem) as info:
        s.load(SYS, FAB, STACK)
    assert info.value.path == path


# --- atomicity and concurrency ------------------------------------------------------------


def _writer_killed_before_replace(root: str, ready: Any) -> None:
    """Child: start an update, signal once the temp file is written, then hang before rename."""

    def hang(fd: int) -> None:
        os.write(fd, b"")  # keep the signature honest: fsync(fd)
        ready.set()
        signal.pause()  # wait to be killed mid-update

    files_mod.os.fsync = hang  # type: ignore[assignment]  # only in this child process
    JsonBaselineStore(Path(root)).update(
        SYS, FAB, STACK, [make_measurement([9.0] * 5, size=4096)], FINGERPRINT
    )


def test_writer_killed_mid_write_leaves_old_file(tmp_path: Path) -> None:
    s = JsonBaselineStore(tmp_path)
    s.update(SYS, FAB, STACK, [make_measurement([1.0] * 5)], FINGERPRINT)
    path = s.path(SYS, FAB, STACK)
    before = path.read_text()

    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    child = ctx.Process(target=_writer_killed_before_replace, args=(str(tmp_path), ready))
    child.start()
    assert child.pid is not None
    try:
        assert ready.wait(60), "child never reached the write"
        temps = list(path.parent.glob(".mpi.json.*.tmp"))
        assert len(temps) == 1 and temps[0].stat().st_size > 0  # the new content was written...
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert path.read_text() == before  # ...but never replaced the old file
    assert len(s.load(SYS, FAB, STACK)) == 1
    # The lock died with the writer; the next update succeeds and removes the stale temp file.
    s.update(SYS, FAB, STACK, [make_measurement([2.0] * 5, size=16)], FINGERPRINT)
    assert len(s.load(SYS, FAB, STACK)) == 2
    assert not list(path.parent.glob(".mpi.json.*.tmp"))


def _add_keys(root: str, worker: int, count: int) -> None:
    s = JsonBaselineStore(Path(root))
    for i in range(count):
        size = 1000 * worker + i
        s.update(SYS, FAB, STACK, [make_measurement([float(size)] * 5, size=size)], FINGERPRINT)


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    workers, per_worker = 4, 8
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_add_keys, args=(str(tmp_path), w, per_worker)) for w in range(workers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * workers
    loaded = JsonBaselineStore(tmp_path).load(SYS, FAB, STACK)
    assert len(loaded) == workers * per_worker
    sizes = sorted(int(e.params["size"]) for e in loaded.values())
    assert sizes == sorted(1000 * w + i for w in range(workers) for i in range(per_worker))


# --- fingerprint diff ---------------------------------------------------------------------


def test_fingerprint_diff_reports_fields_that_matter() -> None:
    new = json.loads(json.dumps(FINGERPRINT))
    new["firmware"] = "22.36.1010"
    new["hostname"] = "node02"  # volatile: ignored
    new["stacks"]["mpi"]["version"] = "5.0.5"
    new["link_rate_gbps"] = 200
    new["cpu_mhz"] = 2450.1  # volatile, and absent before
    new["gid_index"] = 3  # not a field that matters
    del new["mtu"]
    assert fingerprint_diff(FINGERPRINT, new) == [
        ("firmware", "20.31.1014", "22.36.1010"),
        ("link_rate_gbps", 100, 200),
        ("mtu", 4096, None),
        ("stacks.mpi.version", "5.0.3", "5.0.5"),
    ]
    assert fingerprint_diff(FINGERPRINT, FINGERPRINT) == []


def test_fingerprint_diff_custom_fields() -> None:
    assert fingerprint_diff({"a": 1, "b": 1}, {"a": 2, "b": 2}, fields=["b"]) == [("b", 1, 2)]
