"""Descriptive statistics of one measurement's samples (pure: no I/O, no global state).

Percentiles use numpy's default (linear interpolation, "type 7"), the same as pytest-benchmark
and most plotting tools, so numbers shown side by side agree.

The median's confidence interval is a percentile bootstrap (scipy.stats.bootstrap). Percentile
rather than BCa: BCa's acceleration comes from a jackknife, which is unreliable for the median
(a non-smooth statistic) and degenerates on the tied values that timers with coarse resolution
produce. The interval treats samples as independent; batches from one run are often
autocorrelated, so read it as a lower bound on the true uncertainty.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Iterable

import numpy as np
import numpy.typing as npt
import scipy  # scipy.stats loads on first use (scipy imports subpackages lazily)

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000  # enough for a stable 95 % percentile interval; cheap at n <= 1000
MIN_SAMPLES = 5  # below 5 vs 5 a one-sided Mann-Whitney U cannot reach p < 0.01 at all


@dataclass(frozen=True)
class Summary:
    n: int
    min: float
    max: float
    mean: float
    stddev: float  # sample standard deviation (ddof=1); 0.0 when n == 1
    median: float
    p5: float
    p25: float
    p50: float
    p75: float
    p95: float
    p99: float
    p99_9: float
    iqr: float
    cv: float  # stddev / |mean|; 0.0 for constant samples, inf if mean is 0 but spread is not
    median_ci_low: float | None  # None when n < 2: one value says nothing about its spread
    median_ci_high: float | None
    confidence_level: float

    def to_json(self) -> dict[str, Any]:
        """JSON-safe dict: non-finite floats (an infinite cv) become None."""
        out: dict[str, Any] = {}
        for k, v in asdict(self).items():
            out[k] = None if isinstance(v, float) and not math.isfinite(v) else v
        return out


def as_array(samples: Iterable[float]) -> npt.NDArray[np.float64]:
    """Samples as a 1-D float array; empty or non-finite input is a caller bug, so it raises."""
    arr = np.asarray(list(samples), dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("need at least one sample")
    if not np.all(np.isfinite(arr)):
        raise ValueError("samples must be finite (got NaN or inf)")
    return arr


def median_ci(
    samples: Iterable[float],
    confidence_level: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile-bootstrap confidence interval of the median; None when n < 2."""
    x = as_array(samples)
    if x.size < 2:
        return None
    if np.all(x == x[0]):
        # Every resample has the same median: the interval is exact and bootstrap would warn.
        return float(x[0]), float(x[0])
    return percentile_bootstrap((x,), np.median, confidence_level, n_resamples, seed)


def percentile_bootstrap(
    data: tuple[npt.NDArray[np.float64], ...],
    statistic: Any,
    confidence_level: float,
    n_resamples: int,
    seed: int,
    **options: Any,
) -> tuple[float, float]:
    """scipy's percentile bootstrap interval of `statistic`, seeded: the same inputs give the
    same interval.  Degenerate resamples (all ties) are expected with coarse timers: no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.stats.DegenerateDataWarning)
        res = scipy.stats.bootstrap(
            data,
            statistic,
            confidence_level=confidence_level,
            n_resamples=n_resamples,
            method="percentile",
            rng=np.random.default_rng(seed),
            **options,
        )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def summarize(
    samples: Iterable[float],
    confidence_level: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> Summary:
    """Summary of `samples`; the same seed gives the same median CI."""
    x = as_array(samples)
    n = int(x.size)
    p5, p25, p50, p75, p95, p99, p99_9 = (
        float(v) for v in np.percentile(x, [5, 25, 50, 75, 95, 99, 99.9])
    )
    mean = float(np.mean(x))
    stddev = float(np.std(x, ddof=1)) if n > 1 else 0.0
    if stddev == 0.0:
        cv = 0.0
    elif mean == 0.0:
        cv = math.inf
    else:
        cv = stddev / abs(mean)
    ci = median_ci(x, confidence_level, n_resamples, seed)
    return Summary(
        n=n,
        min=float(np.min(x)),
        max=float(np.max(x)),
        mean=mean,
        stddev=stddev,
        median=p50,
        p5=p5,
        p25=p25,
        p50=p50,
        p75=p75,
        p95=p95,
        p99=p99,
        p99_9=p99_9,
        iqr=float(scipy.stats.iqr(x)),
        cv=cv,
        median_ci_low=None if ci is None else ci[0],
        median_ci_high=None if ci is None else ci[1],
        confidence_level=confidence_level,
    )


def block_length(n: int) -> int:
    """Batches per bootstrap block: the n^(1/3) rate, keeping at least MIN_SAMPLES blocks."""
    return max(1, min(round(math.cbrt(n)), n // MIN_SAMPLES))


def blocks(x: npt.NDArray[np.float64], b: int) -> npt.NDArray[np.float64]:
    """Consecutive non-overlapping blocks of `b` samples, shape (n // b, b).

    The n % b leftover samples are dropped from the start, where warm-up residue sits.
    """
    nb = x.size // b
    return x[x.size - nb * b :].reshape(nb, b)
