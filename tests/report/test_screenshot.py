"""The pages looked at as a person would: the run report and the trends page rendered by
headless Chromium, the pictures and the pages checked (report/screenshot.py), and the checker
shown to catch broken pages. Screenshots of the checked pages are kept in results/screenshots/
of the checkout, to be looked at."""

from __future__ import annotations

import base64
import io
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pytest_hpccomm.baselines.history import HistoryStore
from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.report.html import figure_count, render_html
from pytest_hpccomm.report.screenshot import (
    ABSENT,
    ChromiumMissing,
    check_html,
    check_png,
    content_bottom,
    find_chromium,
    take_screenshot,
)
from pytest_hpccomm.report.trends import write_trends_page
from tests.report.demo import demo_results, demo_session
from tests.report.test_trends import record, step_history

ROOT = Path(__file__).resolve().parents[2]
KEEP = ROOT / "results" / "screenshots"
needs_chromium = pytest.mark.skipif(find_chromium() is None, reason=ABSENT)


def png(width: int, height: int, *, flat: bool = False) -> bytes:
    rng = np.random.default_rng(0)
    pixels = (
        np.full((height, width, 3), 200, np.uint8)
        if flat
        else rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
    )
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def page(*body: str) -> str:
    return (
        "<!DOCTYPE html><html><head><title>t</title><style>p{color:#111}</style></head>"
        "<body><main>" + "".join(body) + "</main></body></html>"
    )


def img(data: bytes | str) -> str:
    text = base64.b64encode(data).decode() if isinstance(data, bytes) else data
    return f'<figure><img alt="plot" src="data:image/png;base64,{text}"></figure>'


@pytest.fixture(scope="module")
def demo() -> list[RunResult]:
    return demo_results()


@pytest.fixture(scope="module")
def report_html(demo: list[RunResult]) -> str:
    return render_html(demo, demo_session())


# --- the checks, without a browser ------------------------------------------------------------


def test_the_run_report_passes_the_page_check(demo: list[RunResult], report_html: str) -> None:
    check = check_html(report_html, expect_images=figure_count(demo))
    assert check.problems == []
    assert len(check.images) == figure_count(demo)
    assert all(w >= 800 and h >= 200 for w, h in check.images)
    assert check.rows > len(demo)  # the table of every result


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (img("iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"), "does not decode"),  # a PNG cut after its header
        (img(base64.b64encode(b"not an image at all" * 20).decode()), "does not decode"),
        (img("@@not base64@@"), "does not decode"),
        ('<img alt="plot" src="plot.png">', "not an embedded base64 image"),
        ("<img alt='plot'>", "not an embedded base64 image"),
        (img(png(12, 12)), "too small for a plot"),
        (img(png(400, 300, flat=True)), "of one colour"),
    ],
)
def test_a_broken_image_is_caught(body: str, words: str) -> None:
    check = check_html(page("<h1>report</h1>", img(png(400, 300)), body))
    assert len(check.problems) == 1 and words in check.problems[0], check.problems
    assert check.problems[0].startswith("image 2:")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Traceback (most recent call last):\n  File x.py", "'Traceback (most recent call last)'"),
        ("plot failed: ValueError: x and y must have same first dimension", "'ValueError'"),
        ("UserWarning: Attempt to set non-positive ylim on a log-scaled axis", "'UserWarning'"),
        ("Error rendering figure", "'Error'"),
    ],
)
def test_error_text_on_the_page_is_caught(text: str, words: str) -> None:
    check = check_html(page("<h1>report</h1>", img(png(400, 300)), f"<pre>{text}</pre>"))
    assert any(words in p for p in check.problems), check.problems


def test_an_empty_page_and_a_missing_plot_are_caught(
    demo: list[RunResult], report_html: str
) -> None:
    assert check_html(page()).problems == ["the page shows no text"]
    # words in <style> and <title> are not shown: "Error" there is no problem, and no text
    assert (
        "the page shows no text"
        in check_html(
            "<html><head><title>Error</title><style>.Error{}</style></head><body></body></html>"
        ).problems
    )
    one_less = report_html.replace("<figure>", "<!--", 1).replace("</figure>", "-->", 1)
    n = figure_count(demo)
    assert check_html(one_less, expect_images=n).problems == [f"{n - 1} images, expected {n}"]


def test_the_picture_check(tmp_path: Path) -> None:
    good = tmp_path / "good.png"
    good.write_bytes(png(320, 200))
    assert check_png(good, 320, 200) == []
    assert "expected 320x240" in check_png(good, 320, 240)[0]
    blank = tmp_path / "blank.png"
    blank.write_bytes(png(320, 200, flat=True))
    assert check_png(blank, 320, 200) == [f"screenshot {blank}: blank (one colour, #c8c8c8)"]
    speck = np.full((200, 320, 3), 255, np.uint8)
    speck[10:14, 10:40] = 0  # a few words on a white page: 0.2 % of it
    Image.fromarray(speck).save(tmp_path / "speck.png")
    assert "almost blank" in check_png(tmp_path / "speck.png", 320, 200)[0]
    assert "cannot read it" in check_png(tmp_path / "missing.png", 320, 200)[0]
    (tmp_path / "junk.png").write_bytes(b"\x89PNG junk")
    assert "cannot read it" in check_png(tmp_path / "junk.png", 320, 200)[0]


def test_where_the_page_ends_in_the_picture() -> None:
    bg, ink = (246, 247, 249), (20, 20, 20)
    pic = np.full((400, 50, 3), bg, np.uint8)
    assert content_bottom(pic) == 0  # plain: nothing on it
    pic[100:120, 5:30] = ink
    assert content_bottom(pic) == 120
    pic[350:360, 5:30] = ink  # 40 px of background below: maybe a gap between two blocks
    assert content_bottom(pic) is None
    pic[-1, 10] = ink  # the page goes on below the window
    assert content_bottom(pic) is None


def test_without_chromium_the_reason_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_chromium() is None
    (tmp_path / "p.html").write_text(page("<p>x</p>"))
    with pytest.raises(ChromiumMissing, match="apt-get install chromium"):
        take_screenshot(tmp_path / "p.html", tmp_path / "p.png")


# --- with Chromium ----------------------------------------------------------------------------


def keep(*shots: Path) -> None:
    """Copies for a person to look at, in the checkout's results directory."""
    KEEP.mkdir(parents=True, exist_ok=True)
    for shot in shots:
        shutil.copyfile(shot, KEEP / shot.name)


@needs_chromium
def test_report_and_trends_page_screenshots_are_whole(
    tmp_path: Path, demo: list[RunResult], report_html: str
) -> None:
    report = tmp_path / "report.html"
    report.write_text(report_html)
    store = step_history(tmp_path)
    start = time.monotonic()
    trends = write_trends_page(tmp_path / "trends.html", store, store.keys())
    render = time.monotonic() - start
    shots = [
        take_screenshot(report, tmp_path / "report.png", expect_images=figure_count(demo)),
        take_screenshot(trends.path, tmp_path / "trends.png", expect_images=2),
    ]
    for shot in shots:
        assert shot.ok, shot.describe()
        assert shot.png.stat().st_size > 20_000
        with Image.open(shot.png) as im:
            assert im.size == (shot.width, shot.height)
        print(shot.describe())
    print(f"trends page rendered in {render:.2f} s")
    # the trends page whole, the empty background below it trimmed; the report is several
    # screens of plots and a table of every result, which may go on past MAX_HEIGHT: then
    # the picture says it was cut (its figures are above the table, checked in the HTML)
    assert not shots[1].cut and shots[1].height < shots[1].window
    assert shots[0].cut or shots[0].height < shots[0].window
    assert shots[0].height > 5000 and shots[1].height > 700
    keep(*(s.png for s in shots))


@needs_chromium
def test_broken_pages_fail_through_chromium_too(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text(page("<h1>report</h1>", img("iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB")))
    shot = take_screenshot(broken, tmp_path / "broken.png", expect_images=1)
    assert shot.png.exists()  # Chromium drew it (a broken-image icon): the page check says no
    assert [p for p in shot.problems if "does not decode" in p], shot.problems
    empty = tmp_path / "empty.html"
    empty.write_text("<!DOCTYPE html><html><body style='background:#fff'></body></html>")
    shot = take_screenshot(empty, tmp_path / "empty.png", width=800, height=600)
    assert "the page shows no text" in shot.problems
    assert any("blank (one colour, #ffffff)" in p for p in shot.problems), shot.problems


@needs_chromium
def test_session_keeps_checked_screenshots_in_its_results(pytester: pytest.Pytester) -> None:
    """--hpc-screenshots: the report, the trends page of this system's history (a recorded
    step, then this session's run) and a checked screenshot of each, in the results dir."""
    pytester.makepyfile(
        test_bench="""
        from pytest_hpccomm.measure.measurement import Direction, Measurement

        def test_fake_latency(hpc_record):
            hpc_record(Measurement(stack="mpi", benchmark="osu_latency", params={"size": 8},
                                   samples=tuple(13.0 + i / 100 for i in range(30)), unit="us",
                                   direction=Direction.LOWER_IS_BETTER, metric="latency"))
    """
    )
    history = pytester.path / "history.sqlite"
    store = HistoryStore(history)
    record(store, [10.0 + (i % 3) / 10 for i in range(12)] + [13.0] * 6, step_at=12, system="box")
    results = pytester.path / "results"
    run = pytester.runpytest(
        "--hpc-system=box",
        "--hpc-baselines=bl",
        "--hpc-fabric=ethernet",
        f"--hpc-history={history}",
        f"--hpc-report={results}/report.html",
        "--hpc-screenshots",
    )
    run.assert_outcomes(passed=1)
    run.stdout.fnmatch_lines(
        [
            f"trends page: {results}/trends.html (2 of 2 series, 1 change point(s))",
            f"screenshot {results}/report.png (1280x*): checked, the page and the picture are whole",
            f"screenshot {results}/trends.png (1280x*): checked, the page and the picture are whole",
        ]
    )
    for name, plots in (("report", 1), ("trends", 2)):
        html = (results / f"{name}.html").read_text()
        assert check_html(html, expect_images=plots).problems == []
        with Image.open(results / f"{name}.png") as im:
            assert im.width == 1280 and check_png(results / f"{name}.png", *im.size) == []


def test_session_without_chromium_says_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        test_bench="""
        from pytest_hpccomm.measure.measurement import Direction, Measurement

        def test_fake_latency(hpc_record):
            hpc_record(Measurement(stack="mpi", benchmark="osu_latency", params={"size": 8},
                                   samples=tuple(10.0 + i / 100 for i in range(30)), unit="us",
                                   direction=Direction.LOWER_IS_BETTER, metric="latency"))
    """
    )
    monkeypatch.setattr("pytest_hpccomm.report.screenshot.find_chromium", lambda: None)
    run = pytester.runpytest(
        "--hpc-system=box",
        "--hpc-baselines=bl",
        "--hpc-fabric=ethernet",
        "--hpc-history=none",
        "--hpc-report=out/report.html",
        "--hpc-screenshots",
    )
    run.assert_outcomes(passed=1)
    run.stdout.fnmatch_lines([f"screenshots: not taken: {ABSENT}"])
    assert (pytester.path / "out" / "report.html").exists()
    assert not (pytester.path / "out" / "report.png").exists()
    run = pytester.runpytest(
        "--hpc-system=box",
        "--hpc-baselines=bl",
        "--hpc-fabric=ethernet",
        "--hpc-history=none",
        "--hpc-screenshots",
    )
    run.stdout.fnmatch_lines(
        ["screenshots: none taken (they are of the HTML report: add --hpc-report PATH)"]
    )
