"""Bandwidth as a fraction of the link, for real: the MPI osu_bw items and the gRPC p2p
bandwidth item across the virtual cluster (--hpc-launcher=netns), once with every virtual
host's link shaped to 1 Gbit/s (--hpc-vlink-rate=1G) and once unshaped.

Shaped, every bandwidth record must carry link_rate_gbps == 1.0 with the tbf as its source,
and its fraction of the link must lie in FRACTION, whose edges follow from definitions: above,
the tbf lets through at most one burst (1 ms of the rate, 125 kB) beyond the rate, under 2 % of
a sample's bytes at these sizes; below, half the link, which a unit or shaping error (bytes for
bits, the rate applied twice) crosses and a sender short of CPU on 2 shared cores does not
(how close to 1 a run comes is the sender's performance: benchmarks, not this test). Unshaped,
the same records carry no link rate at all (a veth's `speed` is no rate), and in the same
session they measure more than twice as much, so the shaped ones were held by the link. Each
session is run once.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.cluster.mpi import mpirun_path
from pytest_hpccomm.measure.link import link_fraction
from pytest_hpccomm.proc.jobs import run_job
from tests.cluster.clusterkit import Snapshot

ROOT = Path(__file__).resolve().parents[2]
SUITES = [
    str(SUITES_DIR / "mpi" / "test_perf_osu.py"),
    str(SUITES_DIR / "grpc" / "test_perf_tf_grpc_bench.py"),
]
MPI = next((m for m in ("openmpi", "mpich") if mpirun_path(m) is not None), None)
SIZES = (256 << 10, 1 << 20)  # link-bound at 1 Gbit/s (64 KiB was not quite: docstring)
GRPC_SCHEME = "uniform-large"  # 10 x 1 MiB per RPC
FRACTION = (0.5, 1.02)  # module docstring: from the tbf's burst and from unit/shaping errors
TBF_SOURCE = "tbf fab0 on h0,h1: 1 Gbit/s"

pytestmark = [
    pytest.mark.needs_root,
    pytest.mark.slow,
    pytest.mark.skipif(
        MPI is None, reason="no MPI environment created (ci/bootstrap.sh makes them)"
    ),
]


def bandwidth_records(tmp_path: Path, *options: str) -> list[dict[str, Any]]:
    """Run the two items' suites in a pytest of their own (its own virtual cluster, torn down
    by it) and return the bandwidth records of its results JSON."""
    pytest.importorskip("grpc")
    results = tmp_path / "results.json"
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *SUITES,
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "-k",
        f"osu_bw or (p2p_bandwidth and {GRPC_SCHEME})",
        "--hpc-fabric=ethernet",
        "--hpc-launcher=netns",
        f"--hpc-mpi={MPI}",
        f"--hpc-sizes={','.join(map(str, SIZES))}",
        "--hpc-repeats=1",
        "--hpc-max-repeats=1",
        "--hpc-grpc-peers=python",
        "--hpc-grpc-modes=raw",
        "--hpc-history=none",
        f"--hpc-baselines={tmp_path / 'bl'}",
        "--hpc-system=link-fraction-test",
        f"--hpc-results={results}",
        *options,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # run_job: SIGTERM first at the timeout, so the inner session tears its cluster down
    # (virtual.py's handlers) before the SIGKILL after grace
    res = run_job(argv, env, timeout=600, grace=20.0, label="suites on the virtual cluster")
    assert res.ok, res.describe() + res.stdout[-4000:]
    assert "3 passed" in res.stdout, res.stdout[-2000:]
    doc = json.loads(results.read_text())
    records = [
        dict(r["measurement"], fingerprint=r.get("fingerprint") or doc["session"]["fingerprint"])
        for r in doc["results"]
    ]
    bandwidths = [m for m in records if m["unit"] == "MB/s"]
    got = sorted(
        (m["stack"], m["params"].get("size") or m["params"].get("scheme")) for m in bandwidths
    )
    assert got == [("grpc", GRPC_SCHEME), *(("mpi", s) for s in SIZES)], got
    return bandwidths


def median(xs: list[float]) -> float:
    s = sorted(xs)
    return (s[len(s) // 2] + s[(len(s) - 1) // 2]) / 2


def fraction_of(m: dict[str, Any]) -> float:
    fraction = link_fraction(median(m["samples"]), m["unit"], m["extra"].get("link_rate_gbps"))
    assert fraction is not None, label(m)
    return fraction


def label(m: dict[str, Any]) -> str:
    return f"{m['stack']} {m['benchmark']} {m['params'].get('size') or m['params']['scheme']}"


def test_shaped_link_shows_its_fraction_unshaped_says_unknown(
    no_leaks: Snapshot, tmp_path: Path, record_property: Any
) -> None:
    shaped = bandwidth_records(tmp_path / "shaped", "--hpc-vlink-rate=1G")
    unshaped = bandwidth_records(tmp_path / "unshaped")
    for m in shaped:
        assert m["extra"]["link_rate_gbps"] == 1.0, label(m)
        assert m["extra"]["link_rate_source"] == TBF_SOURCE, label(m)
        assert m["fingerprint"]["vlink_rate_gbps"] == 1.0, label(m)  # a verdict notes it
        value = median(m["samples"])
        fraction = fraction_of(m)
        record_property(f"fraction {label(m)}", f"{fraction:.3f}")
        print(f"{label(m)}: {value:.1f} {m['unit']} = {fraction:.3f} of the 1 Gbit/s link")
        assert FRACTION[0] <= fraction <= FRACTION[1], (
            f"{label(m)}: {value:.1f} {m['unit']} is {fraction:.3f} of 1 Gbit/s, outside {FRACTION}"
        )
    free = {label(m): median(m["samples"]) for m in unshaped}
    for m in unshaped:
        assert "link_rate_gbps" not in m["extra"], label(m)
        assert "link_rate_source" not in m["extra"], label(m)
        assert "vlink_rate_gbps" not in m["fingerprint"], label(m)
    for m in shaped:  # the shaped numbers were the link's, not the peers' own limit
        assert free[label(m)] > 2 * median(m["samples"]), (label(m), free[label(m)])
