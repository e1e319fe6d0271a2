from __future__ import annotations

import base64
import math
import warnings
from html.parser import HTMLParser

import pytest

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.measure.measurement import Direction
from pytest_hpccomm.report.common import families, outcome_counts
from pytest_hpccomm.report.cross_stack import cross_stack
from pytest_hpccomm.report.html import render_html, write_html_report
from pytest_hpccomm.report.plots import _series, bar_png, is_sweep, sweep_png
from pytest_hpccomm.report.scheme_plot import is_scheme_family, scheme_order, scheme_png
from tests.builders import make_result
from tests.report.demo import demo_session

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
VOID = {"meta", "img", "br", "hr", "link", "input"}


class Page(HTMLParser):
    """Collects what the tests look at and checks that every element is closed in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.images: list[dict[str, str | None]] = []
        self.rows: list[dict[str, str | None]] = []
        self.tags: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "img":
            self.images.append(dict(attrs))
        if tag == "tr":
            self.rows.append(dict(attrs))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(text: str) -> Page:
    p = Page()
    p.feed(text)
    p.close()
    assert p.stack == []
    return p


def png_of(img: dict[str, str | None]) -> bytes:
    src = img["src"] or ""
    assert src.startswith("data:image/png;base64,")
    return base64.b64decode(src.split(",", 1)[1])


@pytest.fixture(scope="module")
def demo_page(demo: list[RunResult], tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo's page, rendered once (a figure costs ~0.3 s) with warnings as errors: a
    layout that collapses or a cut legend warns (matplotlib's constrained layout)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = write_html_report(
            tmp_path_factory.mktemp("html") / "report.html", demo, demo_session()
        )
    return path.read_text(encoding="utf-8")


def test_one_embedded_plot_per_family_and_a_row_per_result(demo, demo_page) -> None:
    page = parse(demo_page)
    fams = families(demo)
    cs = cross_stack(demo)
    assert cs is not None
    assert len(page.images) == len(fams) + 1  # and the cross-stack figure, first
    for img in page.images:
        assert png_of(img).startswith(PNG_MAGIC)
    assert str(page.images[0]["alt"]).startswith("cross-stack latency and bandwidth")
    assert str(page.images[1]["alt"]).startswith("grpc · tf_grpc_mimic_step · step time")
    # the cross-stack table (header + a row per path and size), then every result
    assert len(page.rows) == (1 + len(cs)) + (1 + len(demo))
    # self-contained: nothing fetched, nothing run
    assert not page.tags & {"script", "link", "iframe"}
    assert "http://" not in demo_page and "https://" not in demo_page
    body = " ".join(page.text)
    assert "demo-ib-2node" in body and "Fingerprint" in body and "ConnectX-6" in body
    assert "of 200 Gbit/s" in body and "link rate unknown" in body


def test_verdicts_are_coloured_and_changes_listed_first(demo, demo_page) -> None:
    page = parse(demo_page)
    counts = outcome_counts(demo)
    tints = [r.get("style") for r in page.rows if r.get("style")]
    assert tints.count("background:#fde0df") == counts[Outcome.REGRESSION]
    assert tints.count("background:#dff3df") == counts[Outcome.IMPROVEMENT]
    assert tints.count("background:#ececec") == counts[Outcome.NEW]
    attn = demo_page.split('<ul class="attn">')[1].split("</ul>")[0]
    assert attn.count("<li>") == sum(counts[o] for o in (Outcome.REGRESSION, Outcome.IMPROVEMENT))
    assert attn.index(">regression<") < attn.index(">improvement<")
    grouped = demo_page.split('<ul class="attn">')[2].split("</ul>")[0]  # counted per reason
    assert (
        sum(
            int(li.split(" inconclusive</b>")[0].rsplit(">", 1)[1].replace(",", ""))
            for li in grouped.split("<li>")[1:]
        )
        == counts[Outcome.INCONCLUSIVE]
    )
    assert (
        demo_page.index('<ul class="attn">')
        < demo_page.index("<h2>Cross-stack")
        < demo_page.index("<h2>Plots</h2>")
    )
    assert "osu_latency size=8KiB ranks=2" in demo_page


def _grpc_family(demo: list[RunResult], bench: str) -> list[RunResult]:
    return [r for r in demo if r.measurement.benchmark == bench]


def test_grpc_families_are_line_plots_per_scheme(demo) -> None:
    lat = _grpc_family(demo, "tf_grpc_p2p_latency")
    assert is_scheme_family(lat) and not is_sweep(lat)
    # ordered by payload bytes; at equal bytes uniform-* first
    assert scheme_order(lat) == [
        "uniform-small",
        "uniform-medium",
        "random",
        "uniform-large",
        "skew",
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for bench in ("tf_grpc_p2p_latency", "tf_grpc_ps_throughput"):
            assert scheme_png(_grpc_family(demo, bench), bench).startswith(PNG_MAGIC)
    # one line per peer/mode (what differs), not one bar per parameter set
    assert len(_series(lat, ["scheme", "bytes"])) == 4
    assert set(_series(lat, ["scheme", "bytes"])) == {
        "native raw",
        "native serialized",
        "python raw",
        "python serialized",
    }


def test_many_long_labelled_bars_keep_their_axes() -> None:
    """What a gRPC family was before its scheme plot: 60 bars named by 9 params made
    matplotlib warn "constrained_layout not applied because axes sizes collapsed to zero"."""
    rs = [
        make_result(
            stack="grpc",
            benchmark="tf_grpc_ps_throughput",
            metric="rate",
            unit="rpc/s",
            direction=Direction.HIGHER_IS_BETTER,
            baseline=None,
            outcome=Outcome.NEW,
            samples=(1000.0 + i,),
            params={
                "peer": p,
                "mode": m,
                "placement": pl,
                "runtime": "stock",
                "servers": 2,
                "workers": 2,
                "buffers": 1,
                "kind": f"long-parameter-value-{i}",
            },
        )
        for i, (p, m, pl) in enumerate(
            (p, m, pl)
            for p in ("native", "python", "python-aio")
            for m in ("raw", "serialized")
            for pl in ("loopback", "netns")
            for _ in range(5)
        )
    ]
    assert len(rs) == 60 and not is_scheme_family(rs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bar_png(rs, "t").startswith(PNG_MAGIC)


def test_empty_input_renders_a_valid_page(tmp_path) -> None:
    page = parse(write_html_report(tmp_path / "r.html", [], {}).read_text())
    assert page.images == [] and page.rows == []
    assert "No performance results in this session." in " ".join(page.text)


def test_family_kinds(result) -> None:
    sweep = [result(params={"size": s}) for s in (0, 1, 1024)]
    barrier = [result(benchmark="osu_barrier", params={"ranks": n}) for n in (2, 4)]
    assert is_sweep(sweep) and not is_sweep(barrier)
    assert not is_sweep(sweep + barrier)  # mixed: a bar per parameter set
    assert sweep_png(sweep, "t").startswith(PNG_MAGIC)  # 0 B sits on the log axis
    assert bar_png(barrier, "t").startswith(PNG_MAGIC)


@pytest.mark.parametrize("case", ["no-baseline", "single-point", "nan-median", "rates"])
def test_awkward_families_still_plot(result, case) -> None:
    if case == "no-baseline":
        rs = [result(params={"size": s}, baseline=None, outcome=Outcome.NEW) for s in (8, 16)]
    elif case == "single-point":
        rs = [result(params={"size": 4096}, outcome=Outcome.REGRESSION)]
    elif case == "nan-median":
        rs = [
            result(params={"size": 8}, samples=(), baseline=None, outcome=Outcome.NEW),
            result(params={"size": 16}),
        ]
        assert math.isnan(rs[0].verdict.current_median)
    else:
        rs = [
            result(
                benchmark="osu_mbw_mr",
                metric="rate",
                unit="msg/s",
                direction=Direction.HIGHER_IS_BETTER,
                params={"size": s},
                samples=(3.5e6, 3.6e6, 3.4e6),
                baseline=3.0e6,
                outcome=Outcome.IMPROVEMENT,
            )
            for s in (1, 2)
        ]
    page = parse(render_html(rs, {}))
    assert len(page.images) == 1 and png_of(page.images[0]).startswith(PNG_MAGIC)
    assert len(page.rows) == 1 + len(rs)
