"""TF-gRPC-Bench payloads: an iovec of buffers drawn from three size categories.

Categories: small (< 1 KiB, default 10 B), medium (1 KiB to < 1 MiB, default 10 KiB), large
(1 MiB to 10 MiB, default 1 MiB). Schemes over `buffers` buffers (default 10):
  uniform-<category>  every buffer of that category's size
  random              each buffer's category drawn uniformly at random (seeded)
  skew                categories in proportion to the bias (default 60 % large, 30 % medium,
                      10 % small), counts rounded by largest remainder, order shuffled (seeded)
A layout is the list of buffer sizes; peers get layouts, never schemes, so the scheme logic
lives only here. Peer-side module: standard library only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SMALL, MEDIUM, LARGE = "small", "medium", "large"
CATEGORIES: dict[str, tuple[int, int]] = {  # inclusive size range
    SMALL: (1, (1 << 10) - 1),
    MEDIUM: (1 << 10, (1 << 20) - 1),
    LARGE: (1 << 20, 10 << 20),
}
DEFAULT_SIZES = {SMALL: 10, MEDIUM: 10 << 10, LARGE: 1 << 20}
SCHEMES = ("uniform-small", "uniform-medium", "uniform-large", "random", "skew")

POOL_SIZE = 16 << 20  # the largest buffer a peer sends; the C++ peer uses the same pool
_PERIOD = bytes((k * 131 + 7) % 251 for k in range(251))


class PayloadError(ValueError):
    pass


@dataclass(frozen=True)
class PayloadSpec:
    buffers: int = 10
    small: int = DEFAULT_SIZES[SMALL]
    medium: int = DEFAULT_SIZES[MEDIUM]
    large: int = DEFAULT_SIZES[LARGE]
    skew: tuple[float, float, float] = (0.6, 0.3, 0.1)  # large, medium, small
    seed: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.buffers <= 1000:
            raise PayloadError(f"buffers must be 1..1000, not {self.buffers}")
        for cat in CATEGORIES:
            lo, hi = CATEGORIES[cat]
            if not lo <= self.size(cat) <= hi:
                raise PayloadError(f"{cat} buffers must be {lo}..{hi} bytes, not {self.size(cat)}")
        if len(self.skew) != 3 or min(self.skew) < 0 or sum(self.skew) <= 0:
            raise PayloadError(
                f"skew needs three non-negative weights (large, medium, small), not {self.skew}"
            )

    def size(self, category: str) -> int:
        return int(getattr(self, category))


def layout(scheme: str, spec: PayloadSpec) -> list[int]:
    """Buffer sizes of `scheme`; the same (scheme, spec) always gives the same layout."""
    if scheme.startswith("uniform-"):
        cat = scheme.removeprefix("uniform-")
        if cat not in CATEGORIES:
            raise PayloadError(f"unknown scheme {scheme!r}: choose from {', '.join(SCHEMES)}")
        return [spec.size(cat)] * spec.buffers
    rng = random.Random(f"{spec.seed}:{scheme}")  # str seeds hash deterministically
    if scheme == "random":
        return [spec.size(rng.choice((SMALL, MEDIUM, LARGE))) for _ in range(spec.buffers)]
    if scheme == "skew":
        cats = [
            c
            for c, n in zip((LARGE, MEDIUM, SMALL), skew_counts(spec.buffers, spec.skew))
            for _ in range(n)
        ]
        rng.shuffle(cats)
        return [spec.size(c) for c in cats]
    raise PayloadError(f"unknown scheme {scheme!r}: choose from {', '.join(SCHEMES)}")


def skew_counts(buffers: int, weights: tuple[float, float, float]) -> list[int]:
    """Buffers per category in proportion to weights; largest remainder keeps the total exact."""
    total = sum(weights)
    exact = [buffers * w / total for w in weights]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(3), key=lambda i: (exact[i] - counts[i], -i), reverse=True)
    for i in by_remainder[: buffers - sum(counts)]:
        counts[i] += 1
    return counts


def categories_of(sizes: list[int]) -> list[str]:
    return [next(c for c, (lo, hi) in CATEGORIES.items() if lo <= s <= hi) for s in sizes]


_POOL: bytes | None = None


def pool() -> bytes:
    """pool[k] = (k * 131 + 7) % 251, as bench.h: both peers send and check the same bytes."""
    global _POOL
    if _POOL is None:
        _POOL = (_PERIOD * (POOL_SIZE // len(_PERIOD) + 1))[:POOL_SIZE]
    return _POOL


def buffer_at(i: int, size: int) -> memoryview:
    """Buffer i of a layout: a distinct offset per index, so swapped buffers never match."""
    if size > POOL_SIZE:
        raise PayloadError(f"buffer of {size} bytes exceeds the {POOL_SIZE}-byte pool")
    off = (i * 4099) % (POOL_SIZE - size + 1)
    return memoryview(pool())[off : off + size]


def buffers_for(sizes: list[int]) -> list[bytes]:
    return [bytes(buffer_at(i, n)) for i, n in enumerate(sizes)]
