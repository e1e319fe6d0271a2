"""The TensorFlow stack's own logic, without TensorFlow: task names and layouts, the venv's
cache marker, the placements the tasks refuse, the sweep's sizes, pooling and records."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cache import READY
from pytest_hpccomm.measure.measurement import Direction
from pytest_hpccomm.stacks.tf import allreduce, ps
from pytest_hpccomm.stacks.tf import env as tf_env
from pytest_hpccomm.stacks.tf.driver import PS_CLUSTER, RING, Layout, TfError, TfHosts, TfTasks
from pytest_hpccomm.stacks.tf.env import TfEnv, TfEnvError, cache_key, ensure_env
from pytest_hpccomm.stacks.tf.perf import RecvSweep, bench_sizes, measurements, merge
from pytest_hpccomm.stacks.tf.wire import CLIENT, COLLECTIVE, SESSION, parse_task

FAKE = TfEnv(Path("/nonexistent/python"), "2.21.0", "v2.21.0", "", "user")


def test_tasks_are_named_job_colon_index() -> None:
    assert Layout(2, 2).tasks == ["ps:0", "ps:1", "worker:0", "worker:1"]
    assert str(Layout()) == "1ps-1w"


def test_a_layout_names_the_peers_mode() -> None:
    assert Layout().mode == CLIENT
    assert Layout(ps=0, workers=2, collective=True).mode == COLLECTIVE
    assert Layout(ps=0, workers=2, session=True).mode == SESSION
    assert str(Layout(ps=0, workers=2, session=True)) == "2w-session"
    assert str(RING) == "2w-collective" and RING.tasks == RING.workers_tasks == [
        "worker:0",
        "worker:1",
    ]
    assert str(PS_CLUSTER) == "2ps-2w-coordinator"
    assert PS_CLUSTER.tasks == ["ps:0", "ps:1", "worker:0", "worker:1", "chief:0"]
    assert parse_task("worker:1") == ("worker", 1)
    assert parse_task("chief:0") == ("chief", 0)
    for bad in ("master:0", "worker", "worker:x", ":0"):
        with pytest.raises(ValueError, match="expected <job>:<index>"):
            parse_task(bad)


def test_a_ready_venv_is_reused_and_a_stale_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The marker names the key it was made for: another key (a new pin, another Python) or a
    venv without its python makes a new one; a matching one is taken as it is."""
    key = cache_key()
    home = tmp_path / key
    (home / "venv" / "bin").mkdir(parents=True)
    (home / "venv" / "bin" / "python").write_text("")
    made: list[Path] = []

    def create(where: Path, deadline: float, log: object) -> dict[str, str]:
        made.append(where)
        assert not (where / "venv").exists()  # the stale one's leftovers were cleared first
        (where / "venv" / "bin").mkdir(parents=True)
        (where / "venv" / "bin" / "python").write_text("")
        return {"tensorflow": "9.9", "git": "g", "grpc": "core 1.2.3"}

    monkeypatch.setattr(tf_env, "_create", create)
    (home / READY).write_text(json.dumps({"key": "other", "probe": {}}))
    got = ensure_env(tmp_path)
    assert made == [home] and got.version == "9.9" and got.seconds >= 0
    assert json.loads((home / READY).read_text())["key"] == key
    made.clear()
    again = ensure_env(tmp_path)  # the marker this call wrote: nothing made
    assert not made and again.version == "9.9" and again.origin == "built"
    assert again.fingerprint()["tensorflow_grpc"] == "core 1.2.3"


def test_a_user_python_that_is_not_there_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TfEnvError, match="is not a Python executable"):
        tf_env.user_env(tmp_path / "nope")


def test_a_probe_that_saw_no_rpc_from_tensorflow_is_an_error(tmp_path: Path) -> None:
    """An empty gRPC version would leave the fingerprint blind to a change of TensorFlow's
    gRPC: the probe names what TensorFlow said instead (the Python here stands in for one
    with TensorFlow and prints what PROBE_SCRIPT prints)."""

    def python(answer: dict[str, Any]) -> Path:
        path = tmp_path / "python"
        path.write_text(f"#!/bin/sh\necho '{json.dumps(answer)}'\n")
        path.chmod(0o755)
        return path

    blind = {
        "tensorflow": "2.21.0",
        "git": "v",
        "grpc": "",
        "agents": [],
        "error": "UnavailableError: failed to connect",
    }
    with pytest.raises(
        TfEnvError,
        match="gRPC version is unknown: its client sent the "
        "probe's loopback server 'no RPC' "
        r"\(TensorFlow said: UnavailableError",
    ):
        tf_env.probe(python(blind))
    seen = {**blind, "grpc": "1.74.0", "agents": ["grpc-c++/1.74.0 grpc-c/49.0.0"]}
    assert tf_env.probe(python(seen))["grpc"] == "1.74.0"


def test_tasks_refuse_placements_they_cannot_run() -> None:
    with pytest.raises(TfError, match="run on loopback, netns or hosts"):
        TfTasks(FAKE, "moon")
    with pytest.raises(TfError, match="hosts placement needs at least 2 hosts"):
        TfTasks(FAKE, "hosts", TfHosts(("h0",), ("10.0.0.1",), "10.0.0.1"))
    with pytest.raises(TfError, match="needs the session's virtual cluster"):
        TfTasks(FAKE, "netns")
    with pytest.raises(TfError, match="knob 'turbo': one of default, channels_4, gzip"):
        TfTasks(FAKE, "loopback", None, replace(RING, knob="turbo"))
    assert str(replace(RING, knob="gzip")) == "2w-collective-gzip"


def test_tasks_on_hosts_take_host_i_mod_n_at_its_fabric_address() -> None:
    """Fixed ports per task (another host's free ports cannot be probed from here), an IPv6
    address in brackets, the control channel on this host's fabric address."""
    site = TfHosts(("h0", "h1"), ("10.0.0.1", "fd00::2"), "10.0.0.1")
    tasks = TfTasks(FAKE, "hosts", site, PS_CLUSTER)
    tasks._plan()
    ports = [int(a.rsplit(":", 1)[1]) for job in ("ps", "worker", "chief") for a in tasks.spec[job]]
    assert ports == list(range(ports[0], ports[0] + 5)) and ports[-1] < 32768
    assert [a.rsplit(":", 1)[0] for a in tasks.spec["ps"]] == ["10.0.0.1", "[fd00::2]"]
    assert tasks.hosts == {"ps:0": 0, "ps:1": 1, "worker:0": 0, "worker:1": 1, "chief:0": 0}


def test_sweep_sizes_are_powers_of_four() -> None:
    assert bench_sizes([1, 2, 4, 8, 16, 1024, 3000, 4 << 20]) == [1, 4, 16, 1024, 4 << 20]
    # an all-reduce carries whole float32s
    assert allreduce.bench_sizes([1, 4, 16, 3000, 4 << 20]) == [4, 16, 4 << 20]


def _sweep(samples: list[float], valid: bool = True) -> RecvSweep:
    return RecvSweep(
        {64: {"samples": samples, "warmup": 5, "valid": valid}},
        {"tensorflow": "x"},
        ({"foreign_cores": 0.0},),
        "",
        0,
    )


def test_jobs_pool_per_size_and_records_carry_where_jobs_end() -> None:
    pooled = merge([_sweep([100.0, 110.0]), _sweep([200.0, 220.0, 210.0], valid=False)])
    point = pooled.points[64]
    assert point["samples"] == [100.0, 110.0, 200.0, 220.0, 210.0]
    assert point["job_sizes"] == [2, 3] and point["warmup"] == 10 and not point["valid"]
    lat, bw = measurements(pooled, 64, {"placement": "loopback"})
    assert lat.direction is Direction.LOWER_IS_BETTER and lat.unit == "us"
    assert bw.direction is Direction.HIGHER_IS_BETTER and bw.unit == "MB/s"
    assert bw.samples[0] == pytest.approx(64 / 100.0)  # bytes per us = MB/s
    assert lat.extra["job_sizes"] == [2, 3] and bw.params["metric"] == "bandwidth"
    assert len(lat.extra["cpu"]["foreign_cores"]) == 2


def test_allreduce_records_are_latency_then_busbw() -> None:
    """nccl-tests' definitions: algbw = bytes / time; busbw = algbw * 2 (n-1) / n, which is
    algbw itself for two workers; the slowest worker's median beside the latency."""
    sweep = _sweep([100.0, 300.0])
    sweep.points[64]["max_samples"] = [150.0, 350.0]
    lat, bus = allreduce.measurements(sweep, 64, 2, {"placement": "loopback"})
    assert (lat.benchmark, lat.unit, lat.params["ranks"]) == ("tf_allreduce", "us", 2)
    assert lat.extra["max_rank_latency_us"] == 250.0
    assert bus.metric == "busbw" and bus.direction is Direction.HIGHER_IS_BETTER
    assert bus.samples[0] == pytest.approx(64 / 100e-6 / 1e9)
    assert bus.extra["busbw_factor"] == 1.0 and bus.extra["algbw_gb_s"] == pytest.approx(
        (64 / 100e-6 + 64 / 300e-6) / 2 / 1e9
    )  # the batches' median


def test_ps_records_are_steps_per_second_with_bytes_moved() -> None:
    sweep = _sweep([100.0, 200.0, 300.0])
    sweep.points[64]["devices"] = ["/job:ps/replica:0/task:0/device:CPU:0"]
    (rate,) = ps.measurements(sweep, 64, {"placement": "loopback"})
    assert rate.unit == "steps/s" and rate.direction is Direction.HIGHER_IS_BETTER
    # a step pulls and pushes each variable: 200 steps/s x 2 x 4 variables x 64 B
    assert rate.extra["MB/s"] == pytest.approx(200 * 2 * ps.VARIABLES * 64 / 1e6)
    assert ps.bench_sizes([1 << 10, 2048, 4 << 20]) == [1 << 10, 4 << 20]


class _Workers:
    """Stands in for the ring's tasks (orchestrator logic only): records what each worker was
    asked and answers with one point of fixed batch times."""

    layout, tf = RING, FAKE

    def __init__(self) -> None:
        self.asked: list[dict[str, object]] = []

    def request_all(
        self, msgs: dict[str, dict[str, object]], timeout: float | None = None
    ) -> dict[str, object]:
        self.asked.extend(msgs.values())
        return {
            t: {
                "points": [
                    {
                        "bytes": 1 << 16,
                        "samples": [1e-3, 3e-3] if t == "worker:1" else [1e-3, 1e-3],
                        "valid": True,
                    }
                ]
            }
            for t in msgs
        }


def test_packed_jobs_ask_every_worker_alike_and_report_their_mean() -> None:
    workers: Any = _Workers()
    sweep = allreduce.packed_job("four_packs")(workers, [1 << 16], "quick", 1.0)
    first, second = workers.asked
    assert first == second and first["tensors"] == allreduce.TENSORS
    assert first["packing"] == 0.25
    assert first["iters"] == allreduce.SETTINGS["quick"]["iters"] // 2
    point = sweep.points[1 << 16]
    assert point["samples"] == [1000.0, 2000.0] and point["max_samples"] == [1000.0, 3000.0]


SUITE = SUITES_DIR / "tf"
TREES = Path(__file__).resolve().parents[3] / "fixtures" / "sysfs"


def test_on_infiniband_the_suite_skips_saying_tf_grpc_is_tcp(pytester: pytest.Pytester) -> None:
    """TensorFlow's bundled gRPC has no RDMA path: on ib (a recorded EDR host) every item
    skips with that reason first, before any TensorFlow is made or started."""
    for name in (
        "test_perf_tf.py",
        "test_conformance_tf.py",
        "test_collectives_tf.py",
        "test_parameter_server_tf.py",
    ):
        pytester.copy_example(str(SUITE / name))
    result = pytester.runpytest(
        "-rs",
        "--hpc-fabric=ib",
        "--hpc-history=none",
        f"--hpc-sysfs-root={TREES / 'ib-edr-mlx5' / 'sys'}",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
    )
    # warnings are no item's outcome: in a session that imported the suite's modules before,
    # pytester's in-process run warns that it cannot rewrite their asserts
    outcomes = {k: v for k, v in result.parseoutcomes().items() if k not in ("warning", "warnings")}
    assert outcomes.get("skipped", 0) > 0 and set(outcomes) == {"skipped"}, outcomes
    reasons = [line for line in result.stdout.lines if line.startswith("SKIPPED")]
    assert reasons and all(
        "TensorFlow's gRPC runs over TCP: use --hpc-fabric=ipoib" in line for line in reasons
    ), reasons
