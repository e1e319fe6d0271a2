"""The trends page (`python -m pytest_hpccomm history --html`): series over runs, Otava's change
points marked at the run that introduced them, each linked to that run's fingerprint diff."""

from __future__ import annotations

import base64
import io
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from pytest_hpccomm.__main__ import main
from pytest_hpccomm.baselines.history import HistoryStore
from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.measure.measurement import Direction
from pytest_hpccomm.report.trends import collect, select, trend_png, write_trends_page
from tests.builders import make_result

T0 = datetime(2026, 10, 1, 2, 0, tzinfo=timezone.utc)
RECORDED = Path(__file__).parents[1] / "baselines" / "data" / "recorded_osu_latency_medians.json"


def fingerprint(mpi: str) -> dict[str, Any]:
    return {
        "device": "mlx5_0",
        "kernel": "6.1.0-28-amd64",
        "hostname": "cn042",
        "stacks": {"mpi": {"vendor": "Open MPI", "version": mpi}},
    }


def record(
    store: HistoryStore,
    latency: list[float],
    *,
    step_at: int | None = None,
    bandwidth: list[float] | None = None,
    system: str = "sysA",
) -> None:
    """One run per value, a day apart; the MPI in the fingerprint changes at run `step_at`."""
    for i, lat in enumerate(latency):
        fp = fingerprint("5.0.6" if step_at is not None and i >= step_at else "5.0.3")
        fp["hostname"] = f"cn{i % 3}"  # volatile: must never show in a diff
        rs = [
            make_result(
                params={"size": 8},
                samples=(lat * 0.99, lat, lat * 1.01),
                outcome=Outcome.NEW,
                baseline=None,
                system=system,
                fabric="ib",
                fingerprint=fp,
            )
        ]
        if bandwidth is not None:
            bw = bandwidth[i]
            rs.append(
                make_result(
                    benchmark="osu_bw",
                    params={"size": 1 << 20},
                    samples=(bw * 0.99, bw, bw * 1.01),
                    unit="MB/s",
                    direction=Direction.HIGHER_IS_BETTER,
                    metric="bandwidth",
                    outcome=Outcome.NEW,
                    baseline=None,
                    system=system,
                    fabric="ib",
                    fingerprint=fp,
                )
            )
        store.append(
            rs,
            run_id=f"run{i:03d}",
            timestamp=T0 + timedelta(days=i),
            commit=f"{i:02d}" + "c0ffee" * 6,
        )


def step_history(tmp_path: Path) -> HistoryStore:
    """20 runs ~N(10, 0.2) us then 20 runs ~N(13, 0.2) us, MPI 5.0.3 -> 5.0.6 at run 20; a
    flat bandwidth series beside it."""
    rng = np.random.default_rng(20)
    latency = list(np.r_[rng.normal(10.0, 0.2, 20), rng.normal(13.0, 0.2, 20)])
    bandwidth = list(rng.normal(9000.0, 40.0, 40))
    store = HistoryStore(tmp_path / "history.sqlite")
    record(store, latency, step_at=20, bandwidth=bandwidth)
    return store


def red_columns(png: bytes) -> list[int]:
    """x of pixel columns that are mostly the change-worse red over the plot's height: the
    vertical change-point markers (text and dots never fill a column)."""
    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    red = (
        (abs(img[..., 0] - 214) < 30) & (abs(img[..., 1] - 39) < 30) & (abs(img[..., 2] - 40) < 30)
    )
    return [int(x) for x in np.flatnonzero(red.sum(axis=0) > img.shape[0] * 0.5)]


def images(html: str) -> list[Image.Image]:
    out: list[Image.Image] = []
    for data in re.findall(r'<img [^>]*src="data:image/png;base64,([^"]+)"', html):
        img = Image.open(io.BytesIO(base64.b64decode(data)))
        img.load()
        out.append(img)
    return out


def test_step_found_at_its_run_and_diffed(tmp_path: Path) -> None:
    store = step_history(tmp_path)
    trends = collect(store, store.keys())
    by_bench = {t.key.benchmark: t for t in trends}
    lat, bw = by_bench["osu_latency"], by_bench["osu_bw"]
    assert bw.changes == []
    assert [c.point.index for c in lat.changes] == [20]
    change = lat.changes[0]
    assert change.run.run_id == "run020" and change.previous.run_id == "run019"
    assert change.point.before == pytest.approx(10.0, abs=0.15)
    assert change.point.after == pytest.approx(13.0, abs=0.15)
    assert change.worse  # latency went up
    # only the MPI version: the hostname changed too, but it is volatile
    assert change.diff == [("stacks.mpi.version", "5.0.3", "5.0.6")]


def test_the_plot_marks_the_change_and_only_there(tmp_path: Path) -> None:
    store = step_history(tmp_path)
    lat, bw = sorted(collect(store, store.keys()), key=lambda t: not t.changes)
    marked = red_columns(trend_png(lat))
    assert marked, "no change-point marker in the plot"
    assert max(marked) - min(marked) <= 3  # one line, ~2 px wide
    assert red_columns(trend_png(bw)) == []
    # The marker sits between runs 19 and 20: halfway along the 40 runs, give or take a run.
    width = Image.open(io.BytesIO(trend_png(lat))).width
    assert 0.40 * width < marked[0] < 0.60 * width


def test_page_marks_the_change_and_links_its_diff(tmp_path: Path) -> None:
    store = step_history(tmp_path)
    page = write_trends_page(tmp_path / "out" / "trends.html", store, store.keys())
    html = page.path.read_text()
    assert [t.key.benchmark for t in page.shown] == ["osu_latency", "osu_bw"]  # changes first
    assert page.change_count == 1 and page.matched == 2
    # the change table: run, commit, the link to the diff section, which exists and holds it
    row = re.search(r"<tr><td><a href=\"#s1\">[^<]*osu_latency size=8B</a>.*?</tr>", html)
    assert row, "no change-point row for the latency series"
    assert "run020" in row[0] and "20c0ffeec0ff" in row[0]
    change = re.search(r'class="num worse">\+([0-9.]+) %<', row[0])
    assert change and float(change[1]) == pytest.approx(30.0, abs=3.0)
    assert 'href="#diff-s1-r20"' in row[0]
    section = re.search(r'<section class="diff" id="diff-s1-r20">(.*?)</section>', html, re.S)
    assert section, "the linked fingerprint diff section is missing"
    assert "stacks.mpi.version" in section[1]
    assert "<code>5.0.3</code></td><td><code>5.0.6</code>" in section[1]
    assert "run019" in section[1] and "cn0" not in section[1]
    imgs = images(html)
    assert len(imgs) == 2 and all(i.size == (1000, 300) for i in imgs)


def test_recorded_real_step_on_the_page(tmp_path: Path) -> None:
    """Medians of real osu_latency runs on this machine (tests/baselines/data: a 10 % canary
    slowdown from run 15 on, per-run noise ~3.5 %): marked at run 15; nothing in the
    fingerprint changed, and the page says so instead of inventing a cause."""
    series = json.loads(RECORDED.read_text())["series"]["1024"]["step"]
    store = HistoryStore(tmp_path / "history.sqlite")
    record(store, series)
    page = write_trends_page(tmp_path / "trends.html", store, store.keys())
    (trend,) = page.shown
    assert [c.point.index for c in trend.changes] == [15]
    assert trend.changes[0].point.rel_change == pytest.approx(0.10, abs=0.03)
    assert trend.changes[0].diff == []
    html = page.path.read_text()
    assert 'id="diff-s1-r15"' in html and "did not change between these runs" in html
    assert red_columns(base64.b64decode(re.findall(r'base64,([^"]+)"', html)[0]))


def test_improvement_of_a_bandwidth_is_green_not_red(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    store = HistoryStore(tmp_path / "history.sqlite")
    flat = list(rng.normal(5.0, 0.05, 30))
    bw = list(np.r_[rng.normal(8000.0, 30.0, 15), rng.normal(9500.0, 30.0, 15)])
    record(store, flat, bandwidth=bw)
    trends = {t.key.benchmark: t for t in collect(store, store.keys())}
    (change,) = trends["osu_bw"].changes
    assert change.point.index == 15 and not change.worse
    assert red_columns(trend_png(trends["osu_bw"])) == []


def test_many_series_are_capped_changes_first(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    store = HistoryStore(tmp_path / "history.sqlite")
    for s, system in enumerate(["a", "b", "c", "d", "e"]):
        step = s in (1, 3)
        values = list(np.r_[rng.normal(10.0, 0.1, 12), rng.normal(12.0 if step else 10.0, 0.1, 12)])
        record(store, values, step_at=12 if step else None, system=system)
    page = write_trends_page(tmp_path / "t.html", store, store.keys(), limit=3)
    assert page.matched == 5 and len(page.shown) == 3
    assert {t.key.system for t in page.shown[:2]} == {"b", "d"}
    assert not page.shown[2].changes
    html = page.path.read_text()
    assert "2 not shown (limit 3)" in html and len(images(html)) == 3
    assert select(collect(store, store.keys()), 10)[0].changes  # select alone agrees


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_writes_the_page(tmp_path: Path) -> None:
    store = step_history(tmp_path)
    target = tmp_path / "pages" / "trends.html"
    code, out, err = run_cli(
        "history", "--db", str(store.path), "--html", str(target), "--stack", "mpi"
    )
    assert code == 0, err
    assert out == f"trends page: {target} (2 of 2 series, 1 change point(s))\n"
    html = target.read_text()
    assert "stack=mpi" in html and 'id="diff-s1-r20"' in html
    code, out, _ = run_cli(
        "history",
        "--db",
        str(store.path),
        "--html",
        str(target),
        "--benchmark",
        "osu_bw",
        "--limit",
        "1",
    )
    assert code == 0 and "(1 of 1 series, 0 change point(s))" in out
    assert "No change point in the series shown" in target.read_text()


def test_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    store = step_history(tmp_path)
    db = str(store.path)
    cases = [
        (("--html", str(tmp_path)), 1, "cannot write the trends page"),  # a directory
        (("--html", str(tmp_path / "t.html"), "--limit", "0"), 2, "must be at least 1"),
        (("--html", str(tmp_path / "t.html"), "--limit", "many"), 2, "expected a whole number"),
        (("--limit", "3"), 2, "--limit applies to --html only"),
    ]
    for args, status, words in cases:
        code, out, err = run_cli("history", "--db", db, *args)
        assert (code, out) == (status, ""), args
        assert err.count("\n") == 1 and words in err, err
    code, _, err = run_cli("history", "--db", str(tmp_path / "none.sqlite"), "--html", "x.html")
    assert code == 1 and err.count("\n") == 1 and not Path("x.html").exists()


def test_tick_labels_follow_the_spacing_of_runs() -> None:
    from pytest_hpccomm.report.trends import _date_format

    days = [T0 + timedelta(days=i) for i in range(5)]
    assert _date_format(days) == "%m-%d"
    assert _date_format(days + [days[-1] + timedelta(hours=3)]) == "%m-%d %H:%M"
    assert _date_format([T0, T0 + timedelta(days=400)]) == "%Y-%m-%d"


def test_a_sweep_that_changed_in_one_run_is_listed_in_sweep_order(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "history.sqlite")
    sizes = [1, 8, 128, 1024, 65536]
    for i in range(24):
        store.append(
            [
                make_result(
                    params={"size": s},
                    samples=(v, v, v),
                    outcome=Outcome.NEW,
                    baseline=None,
                    fingerprint=fingerprint("5.0.3"),
                )
                for s in sizes
                for v in [10.0 + s / 1000 + (2.0 if i >= 12 else 0.0) + 0.05 * ((i * 7 + s) % 5)]
            ],
            run_id=f"r{i:02d}",
            timestamp=T0 + timedelta(days=i),
        )
    shown = select(collect(store, store.keys()), 10)
    assert [json.loads(t.key.params_key)["size"] for t in shown] == sizes
    assert all([c.point.index for c in t.changes] == [12] for t in shown)


def test_a_paired_series_shows_its_ratio_series_and_the_gates_step(tmp_path: Path) -> None:
    """Nights against a reference: the raw medians drift on nights 5-8 (both sides), the ratio
    does not; from night 12 a canary on the candidate: one ratio step, failing, named."""
    from tests.baselines.test_ratio_gate import noisy, paired

    store = HistoryStore(tmp_path / "h.sqlite")
    ratios = noisy([(12, 1.0), (3, 1.1)])
    for i, x in enumerate(ratios):
        base = 20.0 if 4 <= i < 8 else 10.0  # host drift: both sides 2x slower
        canary = "1.1x" if i >= 12 else None
        store.append([paired(x, base=base, canary=canary)], f"n{i:02d}", T0 + timedelta(days=i))
    record(store, [3.0] * 5, system="nightly")  # a stored-mode series beside it
    page = write_trends_page(tmp_path / "trends.html", store, store.keys())
    html = page.path.read_text()
    first = page.shown[0]
    assert first.gate is not None and [s.index for s in first.gate.fired] == [12]
    assert [c.point.index for c in first.changes] != [12]  # the raw medians show the drift
    row = re.search(r"<h2>Ratio steps</h2>.*?</table>", html, re.S)
    assert row and "FAILS" in row[0] and "candidate: canary - -&gt; 1.1x" in row[0]
    assert "the gate uses the ratio series (paired against the reference openmpi4" in html
    assert "the gate uses the raw medians (runs against stored baselines" in html
    imgs = images(html)
    assert len(imgs) == 3 and imgs[1].size == (1000, 260)  # raw, ratio, the stored series
