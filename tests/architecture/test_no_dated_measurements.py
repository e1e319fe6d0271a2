"""Code says what and why; measurements, with their dates, live in benchmarks/RESULTS.md and
the docs. A date in the package's or the suites' source is run history that goes stale."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATE = re.compile(r"\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b")


def test_no_date_in_the_package_or_the_suites() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for tree in ("pytest_hpccomm", "hpccomm_suites")
        for path in sorted((ROOT / tree).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if DATE.search(line)
    ]
    assert not found, "\n".join(found)
