from __future__ import annotations

import base64
import math
from html.parser import HTMLParser

import pytest

from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.measure.measurement import Direction
from pytest_hpccomm.report.common import families
from pytest_hpccomm.report.html import render_html, write_html_report
from pytest_hpccomm.report.plots import bar_png, is_sweep, sweep_png

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


def test_one_embedded_plot_per_family_and_a_row_per_result(tmp_path, demo, session) -> None:
    path = write_html_report(tmp_path / "report.html", demo, session)
    text = path.read_text(encoding="utf-8")
    page = parse(text)
    fams = families(demo)
    assert len(page.images) == len(fams) == 4
    for img in page.images:
        assert png_of(img).startswith(PNG_MAGIC)
    assert str(page.images[0]["alt"]).startswith("mpi · allreduce · busbw")
    assert len(page.rows) == 1 + len(demo)  # header + results
    # self-contained: nothing fetched, nothing run
    assert not page.tags & {"script", "link", "iframe"}
    assert "http://" not in text and "https://" not in text
    body = " ".join(page.text)
    assert "demo-ib-2node" in body and "Fingerprint" in body and "ConnectX-6" in body


def test_verdicts_are_coloured_and_regressions_listed_first(demo, session) -> None:
    text = render_html(demo, session)
    page = parse(text)
    tints = [r.get("style") for r in page.rows[1:]]
    assert tints.count("background:#fde0df") == 2  # regressions
    assert tints.count("background:#dff3df") == 1  # improvement
    assert tints.count("background:#ececec") == 10  # new
    assert text.index('<ul class="attn">') < text.index("<h2>Plots</h2>")
    assert "osu_latency size=8KiB ranks=2" in text


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
        rs = [result(params={"size": 8}, samples=(), baseline=None, outcome=Outcome.NEW),
              result(params={"size": 16})]
        assert math.isnan(rs[0].verdict.current_median)
    else:
        rs = [result(benchmark="osu_mbw_mr", metric="rate", unit="msg/s",
                     direction=Direction.HIGHER_IS_BETTER, params={"size": s},
                     samples=(3.5e6, 3.6e6, 3.4e6), baseline=3.0e6,
                     outcome=Outcome.IMPROVEMENT) for s in (1, 2)]
    page = parse(render_html(rs, {}))
    assert len(page.images) == 1 and png_of(page.images[0]).startswith(PNG_MAGIC)
    assert len(page.rows) == 1 + len(rs)
