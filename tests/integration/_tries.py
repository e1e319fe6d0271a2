"""Retry budget of the gate tests: at least `attempts` tries, and on for `patience` seconds, so
a neighbour that holds the cores for a couple of minutes is waited out, not skipped."""

from __future__ import annotations

import time
from collections.abc import Iterator


def tries(attempts: int, patience: float) -> Iterator[int]:
    deadline = time.monotonic() + patience
    n = 0
    while n < attempts or time.monotonic() < deadline:
        yield n
        n += 1
