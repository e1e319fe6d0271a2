"""Look at a page as a person would: headless Chromium takes a screenshot, and checks say
whether the picture and the page are whole.

    hpccomm screenshot results/report.html [results/report.png]

A page can be valid HTML and still show nothing useful: a plot that failed to encode, an
<img> whose data is garbage (the browser draws a broken-image icon), a traceback or a
matplotlib warning that ended up in the text, an empty body. So there are two checks:

More: docs/explanation/internals.md (pytest_hpccomm.report.screenshot).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import io
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

from pytest_hpccomm.proc.jobs import JobResult, run_job

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
ABSENT = "chromium not found on PATH (Debian: apt-get install chromium)"
WIDTH = 1280
MAX_HEIGHT = 16384  # taller windows make Chromium tile and slow down; a page beyond is cut
CONTENT_WIDTH = 1160  # the reports' main column (max-width 1240 less padding and the figure's)
MIN_IMAGE = (100, 50)  # smaller is not a plot
MIN_INK = 0.005  # share of the picture off its background colour: a real page has far more
ROW = 84  # px per table row: the run report's message column wraps to four lines at 1280
MARGIN = 24  # px of background kept below the page when the rest is trimmed
GAP = 80  # px: more plain background than between two blocks of these pages: the page ended
# Text a page must never show: a Python traceback, an exception's or a warning's name.
BAD_TEXT = re.compile(r"Traceback \(most recent call last\)|\b\w*Error\b|\b\w*Warning\b")


class ChromiumMissing(RuntimeError):
    """No Chromium to take the screenshot with (the message says how to install it)."""


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class _Page(HTMLParser):
    """The page's <img> sources and its visible text (not <style>, <script> or <title>)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.images: list[str | None] = []
        self.text: list[str] = []
        self.rows = 0
        self.blocks = 0  # headings, paragraphs, figures: each adds some height
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script", "title"):
            self._hidden += 1
        elif tag == "img":
            self.images.append(dict(attrs).get("src"))
        elif tag == "tr":
            self.rows += 1
        elif tag in ("h1", "h2", "h3", "p", "figure", "section", "details", "li"):
            self.blocks += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script", "title") and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden and data.strip():
            self.text.append(data.strip())


@dataclass(frozen=True)
class PageCheck:
    images: list[tuple[int, int]]  # (width, height) of each <img> that decoded
    rows: int
    blocks: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def estimated_height(self, width: int = WIDTH) -> int:
        """The page's laid-out height at this window width, roughly (see the module doc)."""
        column = min(CONTENT_WIDTH, width - 60)
        pictures = sum(h * min(1.0, column / w) for w, h in self.images if w)
        guess = pictures + ROW * self.rows + 40 * self.blocks + 200
        return int(min(MAX_HEIGHT, max(600, guess)))


def _image(src: str | None, n: int) -> tuple[tuple[int, int] | None, str | None]:
    """(size, problem) of the n-th <img>."""
    head, sep, data = (src or "").partition(",")
    if not sep or not head.startswith("data:image/") or not head.endswith(";base64"):
        return None, f"image {n}: not an embedded base64 image ({(src or 'no src')[:40]!r})"
    try:
        raw = base64.b64decode(data, validate=True)
        with Image.open(io.BytesIO(raw)) as img:
            img.load()
            pixels = np.asarray(img.convert("L"))
            size = img.size
    except (binascii.Error, ValueError, OSError, SyntaxError) as exc:  # PIL raises SyntaxError too
        return None, f"image {n}: does not decode ({type(exc).__name__}: {exc})"
    if size[0] < MIN_IMAGE[0] or size[1] < MIN_IMAGE[1]:
        return size, f"image {n}: {size[0]}x{size[1]} px, too small for a plot"
    if pixels.std() < 1.0:
        return size, f"image {n}: {size[0]}x{size[1]} px of one colour"
    return size, None


def check_html(text: str, *, expect_images: int | None = None) -> PageCheck:
    """Problems a person would see on this page (see the module doc); [] when none."""
    page = _Page()
    page.feed(text)
    page.close()
    problems: list[str] = []
    sizes: list[tuple[int, int]] = []
    for n, src in enumerate(page.images, 1):
        size, problem = _image(src, n)
        if size is not None:
            sizes.append(size)
        if problem:
            problems.append(problem)
    if expect_images is not None and len(page.images) != expect_images:
        problems.append(f"{len(page.images)} images, expected {expect_images}")
    visible = " ".join(page.text)
    if not visible:
        problems.append("the page shows no text")
    for match in sorted({m.group(0) for m in BAD_TEXT.finditer(visible)}):
        at = visible.find(match)
        problems.append(f"the page shows {match!r}: ...{visible[max(0, at - 40) : at + 80]}...")
    return PageCheck(sizes, page.rows, page.blocks, problems)


def check_png(path: Path, width: int, height: int) -> list[str]:
    """Problems of the screenshot itself: missing, wrong size, blank."""
    try:
        with Image.open(path) as img:
            img.load()
            rgb = np.asarray(img.convert("RGB")).reshape(-1, 3)
            size = img.size
    except (OSError, SyntaxError) as exc:  # UnidentifiedImageError is an OSError
        return [f"screenshot {path}: cannot read it ({exc})"]
    problems = []
    if size != (width, height):
        problems.append(f"screenshot {path}: {size[0]}x{size[1]} px, expected {width}x{height}")
    packed = (rgb[:, 0].astype(np.int64) << 16) | (rgb[:, 1].astype(np.int64) << 8) | rgb[:, 2]
    colours, counts = np.unique(packed, return_counts=True)
    ink = 1.0 - counts.max() / packed.size
    if len(colours) == 1:
        problems.append(f"screenshot {path}: blank (one colour, #{int(colours[0]):06x})")
    elif ink < MIN_INK:
        problems.append(f"screenshot {path}: almost blank ({ink:.2%} of it off the background)")
    return problems


def _rows(path: Path) -> np.ndarray:
    with Image.open(path) as img:
        return np.asarray(img.convert("RGB"))


def content_bottom(pixels: np.ndarray) -> int | None:
    """Rows from the top to the last that is not the bottom row's plain background colour
    (0 for a plain picture); None when the page may go on below the window: the bottom row is
    not plain, or the plain band above it is no taller than a gap between two blocks."""
    bottom = pixels[-1]
    if (bottom != bottom[0]).any():
        return None
    differs = np.flatnonzero((pixels != bottom[0]).any(axis=(1, 2)))
    if not differs.size:
        return 0
    end = int(differs[-1]) + 1
    return end if len(pixels) - end >= GAP else None


@dataclass(frozen=True)
class Screenshot:
    page: Path
    png: Path
    width: int
    height: int  # of the picture kept (the window's, less the background trimmed below)
    window: int  # the window's height the picture was taken at
    seconds: float  # Chromium's runs, start to reaped
    problems: list[str]
    cut: bool = False  # the page is taller than MAX_HEIGHT: its end is not in the picture

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        """One line for the terminal summary or an assertion message."""
        head = (
            f"screenshot {self.png} ({self.width}x{self.height}, {self.seconds:.1f} s"
            + (f", cut at {self.window} px" if self.cut else "")
            + ")"
        )
        if self.ok:
            return f"{head}: checked, the page and the picture are whole"
        return f"{head}: {len(self.problems)} problem(s): " + "; ".join(self.problems)


def _chromium(
    exe: str, page: Path, png: Path, width: int, height: int, timeout: float
) -> JobResult:
    png.unlink(missing_ok=True)  # an old picture must not pass for this one
    profile = Path(tempfile.mkdtemp(prefix="hpccomm-chromium-"))  # run_job removes it
    env = dict(
        os.environ,
        HOME=str(profile),
        XDG_CONFIG_HOME=str(profile / "config"),
        XDG_CACHE_HOME=str(profile / "cache"),
    )
    argv = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-sync",
        "--disable-component-update",
        "--mute-audio",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        f"--screenshot={png.resolve()}",
        page.as_uri(),
    ]
    return run_job(argv, env, timeout=timeout, label="chromium --screenshot", scratch=profile)


def take_screenshot(
    page: str | os.PathLike[str],
    png: str | os.PathLike[str],
    *,
    expect_images: int | None = None,
    width: int = WIDTH,
    height: int | None = None,
    timeout: float = 90.0,
    chromium: str | None = None,
) -> Screenshot:
    """Screenshot `page` into `png` with headless Chromium and check both (problems in the
    result; ChromiumMissing when there is none). `height`: a fixed window, nothing trimmed."""
    page, png = Path(page).resolve(), Path(png)
    exe = chromium or find_chromium()
    if exe is None:
        raise ChromiumMissing(ABSENT)
    checked = check_html(page.read_text(encoding="utf-8"), expect_images=expect_images)
    png.parent.mkdir(parents=True, exist_ok=True)
    window = height or checked.estimated_height(width)
    start = time.monotonic()
    job = _chromium(exe, page, png, width, window, timeout)
    problems = list(checked.problems)
    bottom: int | None = None
    if job.ok and png.exists() and height is None:
        bottom = content_bottom(_rows(png))
        if bottom is None and window < MAX_HEIGHT:  # the page goes on: once more, tallest
            window = MAX_HEIGHT
            job = _chromium(exe, page, png, width, window, timeout)
            bottom = content_bottom(_rows(png)) if job.ok and png.exists() else None
    seconds = time.monotonic() - start
    if not job.ok:
        problems.append(job.describe())
    kept, cut = window, False
    if png.exists():
        problems += check_png(png, width, window)
        if not problems and height is None:
            cut = bottom is None
            kept = min(window, (bottom or window) + MARGIN)
            if kept < window:
                Image.fromarray(_rows(png)[:kept]).save(png, format="PNG")
    elif job.ok:
        problems.append(f"chromium wrote no screenshot: {job.describe()}")
    return Screenshot(page, png, width, kept, window, seconds, problems, cut)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hpccomm screenshot", description=__doc__.split("\n")[0])
    parser.add_argument("page", help="the HTML page")
    parser.add_argument("png", nargs="?", help="the screenshot (default: the page's .png)")
    parser.add_argument("--images", type=int, help="how many plots the page must show")
    parser.add_argument("--width", type=int, default=WIDTH)
    args = parser.parse_args(argv)
    page = Path(args.page)
    if not page.is_file():
        print(f"no page at {page}", file=sys.stderr)
        return 2
    try:
        shot = take_screenshot(
            page, args.png or page.with_suffix(".png"), expect_images=args.images, width=args.width
        )
    except ChromiumMissing as exc:
        print(exc, file=sys.stderr)
        return 1
    print(shot.describe())
    return 0 if shot.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
