"""Side by side: a result names another stack's point (extra["beside"]); the report pairs
them when both ran, with the ratio of their medians."""

from __future__ import annotations

import dataclasses

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.report.beside import beside, pairs
from pytest_hpccomm.report.markdown import markdown_summary
from tests.builders import make_result


def _hvd(size: int, median: float, mpi: str = "openmpi") -> RunResult:
    r = make_result(
        stack="horovod",
        benchmark="hvd_allreduce",
        samples=(median,),
        params={"size": size, "ranks": 2, "controller": "mpi", "placement": "loopback"},
    )
    m = dataclasses.replace(
        r.measurement,
        extra=beside(
            "mpi",
            "osu_allreduce",
            {"mpi": mpi, "placement": "loopback", "ranks": 2, "size": size},
            "Horovod (mpi) / OSU allreduce (openmpi)",
        ),
    )
    return dataclasses.replace(r, measurement=m)


def _osu(size: int, median: float, mpi: str = "openmpi", metric: str = "latency") -> RunResult:
    return make_result(
        stack="mpi",
        benchmark="osu_allreduce",
        samples=(median,),
        metric=metric,
        params={"size": size, "ranks": 2, "mpi": mpi, "placement": "loopback"},
    )


def test_pairs_match_every_named_param_and_the_metric() -> None:
    rs = [
        _hvd(16, 1080.0),
        _osu(16, 12.0),
        _osu(16, 30.0, mpi="mpich"),
        _osu(16, 99.0, metric="busbw"),
        _hvd(64, 1000.0),
        _osu(4096, 20.0),
    ]
    found = pairs(rs)
    assert [(p.this.measurement.params["size"], p.other.verdict.current_median) for p in found] == [
        (16, 12.0)
    ]  # 64 B has no OSU point: no pair
    assert found[0].ratio == 90.0


def test_markdown_shows_the_pairs_with_their_ratio() -> None:
    md = markdown_summary([_hvd(16, 1080.0), _osu(16, 12.0)], {})
    assert "### Side by side" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| Horovod (mpi)"))
    assert "size=16B" in row and row.rstrip(" |").endswith("90.00x"), row
    assert "### Side by side" not in markdown_summary([_hvd(16, 1080.0)], {})
