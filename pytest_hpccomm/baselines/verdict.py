"""Verdicts: this run's samples against the stored baseline for the same key (pure).

r = median(current) / median(baseline), "worse" = up for lower-is-better metrics, down for
higher-is-better ones; band = [1-tol, 1+tol]. `judge` returns NEW without a baseline;
REGRESSION when a one-sided Mann-Whitney test says worse (p < alpha) AND the whole block
bootstrap CI of r (hierarchical over pooled jobs) lies beyond the band, IMPROVEMENT mirrored;
PASS for a point ratio inside the band; INCONCLUSIVE otherwise (too few samples, a CI wider
than the band, an effect the statistics do not confirm). A baseline of MIN_SESSIONS or more
sessions widens the CI by the spread between them (Student's t); with fewer it claims nothing
(FEW_SESSIONS). Why whole-CI, why sessions, and what the rule was measured to do:
docs/explanation/verdicts.md.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import numpy.typing as npt
import scipy  # scipy.stats loads on first use (scipy imports subpackages lazily)

from pytest_hpccomm.measure.measurement import Direction, Measurement
from pytest_hpccomm.measure.stats import MIN_SAMPLES, block_length, blocks, percentile_bootstrap

if TYPE_CHECKING:  # only for annotations
    from pytest_hpccomm.baselines.store import BaselineEntry

DEFAULT_TOLERANCE = 0.05
DEFAULT_ALPHA = 0.01
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20240611
MIN_SESSIONS = 3  # fewer session medians give no usable spread (two give one difference)
BETWEEN_SESSIONS = "spread between sessions"  # reason prefix: more jobs cannot narrow it
FEW_SESSIONS = "spread between sessions unknown: too few baseline sessions"  # reason prefix


class Outcome(str, enum.Enum):
    PASS = "pass"
    REGRESSION = "regression"  # the test fails
    IMPROVEMENT = "improvement"
    NEW = "new"  # no baseline for this key: passes, is reported
    INCONCLUSIVE = "inconclusive"  # too noisy to say; fails only under --hpc-strict


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    current_median: float
    baseline_median: float | None
    ratio: float | None  # current median / baseline median (raw, not direction-adjusted)
    ci_low: float | None  # confidence interval of that ratio
    ci_high: float | None
    p_value: float | None  # one-sided test in the "worse" direction
    tolerance: float  # relative effect that counts, e.g. 0.05
    message: str  # one readable line; the failure message of a regression
    reason: str = ""  # why, in a few words (mostly for INCONCLUSIVE)
    n_current: int = 0
    n_baseline: int | None = None
    p_better: float | None = None  # the same test in the "better" direction
    baseline_sessions: int | None = None  # runs that updated the baseline entry
    between_sessions_sd: float | None = None  # sd of their log medians (MIN_SESSIONS or more)
    # the log half-width that spread adds to the CI: no number of this run's jobs removes it
    session_margin: float | None = None
    # the smallest slowdown (a factor >= 1, in the metric's worse direction) this verdict's
    # interval could have called a regression: its power (gate.py); None without an interval
    min_effect: float | None = None
    # this host's reference-probe speed against the baseline set's (above 1: faster), when it
    # lay outside the probe's own noise and widened the band on the side it explains
    host_shift: float | None = None
    informational: str = ""  # why this verdict claims nothing ("" when it counts)
    unclaimed: Outcome | None = None  # what the jobs showed where too few sessions claim it

    @classmethod
    def of(
        cls,
        outcome: Outcome,
        medians: tuple[float, float],
        ratio: float | None,
        ci: tuple[float, float] | None,
        p: tuple[float | None, float | None],
        counts: tuple[int, int],
        **more: Any,
    ) -> Verdict:
        """A comparison's verdict, stored or paired: medians and job counts (current,
        baseline), the ratio with its interval, the one-sided p-values (worse, better); `more`
        is the rest (tolerance, message, reason, ...)."""
        return cls(
            outcome=outcome,
            current_median=medians[0],
            baseline_median=medians[1],
            ratio=ratio,
            ci_low=None if ci is None else ci[0],
            ci_high=None if ci is None else ci[1],
            p_value=p[0],
            p_better=p[1],
            n_current=counts[0],
            n_baseline=counts[1],
            **more,
        )


def fmt_num(x: float) -> str:
    """Three significant digits without scientific notation for everyday magnitudes."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    digits = max(0, 2 - math.floor(math.log10(abs(x))))
    return f"{x:.{digits}f}"


def fmt_p(p: float) -> str:
    if p >= 0.001:
        return f"{p:.2g}"
    mantissa, exponent = f"{p:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def fmt_tol(tol: float) -> str:
    return f"{tol * 100:g}%"


def verdict_line(outcome: Outcome, head: str, detail: list[str], reason: str) -> str:
    """The one-line message of a verdict, stored or paired: "outcome: head (detail, ...)",
    with the reason after a semicolon when it is INCONCLUSIVE."""
    msg = f"{outcome.value}: {head} ({', '.join(detail)})"
    return f"{msg}; {reason}" if outcome is Outcome.INCONCLUSIVE else msg


def describe(benchmark: str, params: Mapping[str, object]) -> str:
    """How a measurement is named in messages, e.g. "osu_latency size=8"."""
    return " ".join([benchmark, *(f"{k}={v}" for k, v in sorted(params.items()))])


def _ratio_ci(
    cur_blocks: npt.NDArray[np.float64],
    base_blocks: npt.NDArray[np.float64],
    confidence_level: float,
    n_resamples: int,
    seed: int,
) -> tuple[float, float]:
    """Block-bootstrap percentile CI of median(cur) / median(base), each side resampled apart.

    scipy resamples block *indices*; the statistic expands them to the blocks' samples, so
    whole blocks (and the correlation inside them) are drawn together.
    """
    if np.all(cur_blocks == cur_blocks.flat[0]) and np.all(base_blocks == base_blocks.flat[0]):
        r = float(cur_blocks.flat[0] / base_blocks.flat[0])
        return r, r  # every resample gives the same ratio

    def ratio(ic: npt.NDArray[np.float64], ib: npt.NDArray[np.float64], axis: int) -> object:
        xc = cur_blocks[np.moveaxis(ic, axis, -1).astype(np.intp)]  # (..., nblocks, b)
        xb = base_blocks[np.moveaxis(ib, axis, -1).astype(np.intp)]
        xc = xc.reshape(*xc.shape[:-2], -1)
        xb = xb.reshape(*xb.shape[:-2], -1)
        return np.median(xc, axis=-1) / np.median(xb, axis=-1)

    indices = (np.arange(len(cur_blocks), dtype=float), np.arange(len(base_blocks), dtype=float))
    return percentile_bootstrap(
        indices, ratio, confidence_level, n_resamples, seed, paired=False, vectorized=True
    )


def job_parts(
    samples: npt.NDArray[np.float64], sizes: Sequence[int] | None
) -> list[npt.NDArray[np.float64]]:
    """The samples split into their jobs, in order; one part when the sizes are absent or do
    not add up to the samples (a record that was not pooled)."""
    if not sizes or sum(sizes) != samples.size or any(int(k) < 1 for k in sizes):
        return [samples]
    edges = np.cumsum([int(k) for k in sizes])[:-1]
    return list(np.split(samples, edges))


def _job_blocks(parts: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
    """Shape (jobs, blocks, b): each job cut into blocks of one length; a longer job keeps its
    last blocks (its first hold the warm-up residue), so every job weighs the same."""
    b = block_length(min(p.size for p in parts))
    per_job = [blocks(p, b) for p in parts]
    nb = min(len(x) for x in per_job)
    return np.stack([x[len(x) - nb :] for x in per_job])


def _resampled_medians(
    jobs: npt.NDArray[np.float64], n_resamples: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Medians of hierarchical resamples: jobs with replacement, then each drawn job's blocks."""
    k, nb, _ = jobs.shape
    pick_jobs = rng.integers(0, k, size=(n_resamples, k))
    pick_blocks = rng.integers(0, nb, size=(n_resamples, k, nb))
    drawn = jobs[pick_jobs[:, :, None], pick_blocks]  # (resamples, k, nb, b)
    return np.asarray(np.median(drawn.reshape(n_resamples, -1), axis=1), dtype=np.float64)


def _jobs_ratio_ci(
    cur: list[npt.NDArray[np.float64]],
    base: list[npt.NDArray[np.float64]],
    confidence_level: float,
    n_resamples: int,
    seed: int,
) -> tuple[float, float]:
    """Percentile CI of median(cur) / median(base) from the hierarchical bootstrap, each side
    resampled apart. (Not scipy.stats.bootstrap: it resamples one level only.)"""
    rng = np.random.default_rng(seed)
    ratios = _resampled_medians(_job_blocks(cur), n_resamples, rng) / _resampled_medians(
        _job_blocks(base), n_resamples, rng
    )
    tail = (1.0 - confidence_level) / 2.0
    lo, hi = np.quantile(ratios, [tail, 1.0 - tail])
    return float(lo), float(hi)


def between_sessions_sd(medians: Sequence[float]) -> float | None:
    """The sd of the log session medians, or None below MIN_SESSIONS (or for a non-positive
    median, whose ratio is undefined)."""
    if len(medians) < MIN_SESSIONS or min(medians) <= 0:
        return None
    return float(np.std(np.log(np.asarray(medians, dtype=np.float64)), ddof=1))


MIN_FAMILY = 3  # entries of a family with MIN_SESSIONS sessions before its typical spread counts


def typical_sessions_sd(families_levels: Sequence[Sequence[float]]) -> float | None:
    """The spread between sessions typical of a family of entries (one benchmark and metric of
    a stack: its sizes, placements, implementations), each given as its session medians: the
    median of their variances, each scaled by the median of its chi-square law so entries of
    k sessions agree on it, or None with fewer than MIN_FAMILY entries of MIN_SESSIONS.
    Why: k - 1 = 2 degrees of freedom leave one entry's sd below a third of the true one in one
    case in ten; a point is never taken to be steadier between sessions than its family is."""
    scaled = []
    for levels in families_levels:
        sd = between_sessions_sd(levels)
        if sd is not None:
            d = len(levels) - 1
            scaled.append(sd * sd / (float(scipy.stats.chi2.median(d)) / d))
    if len(scaled) < MIN_FAMILY:
        return None
    return math.sqrt(float(np.median(scaled)))


def band(tolerance: float) -> tuple[float, float]:
    """The tolerance band in ratio space, (down, up): a change inside it is no change."""
    return 1.0 - tolerance, 1.0 + tolerance


def within_band(ratio: float, tolerance: float) -> bool:
    down, up = band(tolerance)
    return down <= ratio <= up


def host_band(
    tolerance: float, host_shift: float, lower_is_better: bool
) -> tuple[tuple[float, float], tuple[float, float]]:
    """(claim edges, pass edges) for a host `host_shift` times as fast as the baseline's,
    which moves a latency by up to 1/host_shift and a bandwidth by up to host_shift (the probe
    says how far, not how much of that reaches this stack): a change is claimed only beyond
    what the host may explain (the band widened on that side), a PASS only where no share of
    it could hide a tolerance-sized change (the band narrowed, possibly to nothing). A faster
    host never excuses a regression: a 1.5x slowdown stays one on a host probed 1.2x faster."""
    down, up = band(tolerance)
    e = 1.0 / host_shift if lower_is_better else host_shift
    return ((min(down, down * e), max(up, up * e)), (max(down, down * e), min(up, up * e)))


def min_effect(
    ratio: float,
    ci: tuple[float, float],
    edges: tuple[float, float],
    lower_is_better: bool,
    paired: bool = False,
) -> float:
    """The smallest slowdown factor (>= 1) that an interval of this one's width would have
    called a regression: the stored rule asks the whole interval beyond the band's worse edge,
    the paired rule an interval that excludes 1 and reaches beyond that edge (paired.py)."""
    lo, hi = ci
    down, up = edges
    if lower_is_better:  # a slowdown r moves the interval to (r lo, r hi) / ratio
        need = max(ratio / lo, up * ratio / hi) if paired else up * ratio / lo
    else:  # a slowdown r moves it to (lo, hi) / (r ratio)
        need = max(hi / ratio, lo / (down * ratio)) if paired else hi / (down * ratio)
    return max(1.0, need)


def widened(ratio: float, ci: tuple[float, float], margin: float) -> tuple[float, float]:
    """`ci` with each log half-width combined in quadrature with `margin` (a log half-width)."""
    lo, hi = ci
    return (
        ratio * math.exp(-math.hypot(math.log(ratio / lo), margin)),
        ratio * math.exp(math.hypot(math.log(hi / ratio), margin)),
    )


def judge(
    current: Measurement,
    baseline: BaselineEntry | None,
    tolerance: float = DEFAULT_TOLERANCE,
    alpha: float = DEFAULT_ALPHA,
    seed: int = DEFAULT_SEED,
    confidence_level: float | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    family_sd: float | None = None,
    host_shift: float = 1.0,
) -> Verdict:
    """Judge `current` against `baseline` (see the module docstring for the rule).
    `family_sd`: the spread between sessions typical of the baseline's family
    (typical_sessions_sd), a floor under the entry's own from MIN_SESSIONS on; the t quantile
    keeps the entry's k - 1 degrees of freedom either way (a family's entries were written by
    the same k sessions: they add entries, not session draws). `host_shift`: this host's probe speed against
    the set's, outside the probe's noise (1.0: the same host speed as far as the probe can tell;
    host_band).

    The tolerance used is the measurement's own, else the baseline's, else `tolerance`.
    `confidence_level` defaults to 1 - 2 * alpha (98 % for alpha 0.01). The same inputs and
    seed give the same verdict.
    """
    tol = current.tolerance
    if tol is None and baseline is not None and baseline.tolerance is not None:
        tol = baseline.tolerance
    if tol is None:
        tol = tolerance
    if not 0 < tol < 1:
        raise ValueError(f"tolerance must be in (0, 1), got {tol!r}")
    if not 0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha!r}")
    level = 1.0 - 2.0 * alpha if confidence_level is None else confidence_level

    cur = np.asarray(current.samples, dtype=np.float64)
    if cur.size == 0 or not np.all(np.isfinite(cur)):
        raise ValueError(f"{current.key}: samples must be non-empty and finite")
    name = describe(current.benchmark, current.params)
    unit = current.unit
    cur_med = float(np.median(cur))

    if baseline is None:
        return Verdict(
            outcome=Outcome.NEW,
            current_median=cur_med,
            baseline_median=None,
            ratio=None,
            ci_low=None,
            ci_high=None,
            p_value=None,
            tolerance=tol,
            message=f"new: {name}: median {fmt_num(cur_med)} {unit} (n={cur.size}), no baseline",
            reason="no baseline",
            n_current=int(cur.size),
        )

    lower_better = current.direction == Direction.LOWER_IS_BETTER

    def ratio_is_better(r: float | None) -> bool:
        return r is not None and (r < 1.0 if lower_better else r > 1.0)

    base = np.asarray(baseline.samples, dtype=np.float64)
    base_med = float(np.median(base))
    levels = baseline.session_medians
    s_own = between_sessions_sd(levels)
    s_b = s_own if s_own is None or family_sd is None else max(s_own, family_sd)
    # degrees of freedom of s_b: its k sessions' k - 1, also where the family's floor sets s_b:
    # one session's host speed moves every entry of the family alike, so pooling the family's
    # entries adds no session draws (a t quantile: 2 sessions' differences give t = 6.96 at
    # 98 %, not z = 2.33)
    dof = len(levels) - 1
    edges, pass_edges = host_band(tol, host_shift, current.direction == Direction.LOWER_IS_BETTER)
    if s_b is not None and base_med > 0 and np.all(base > 0):
        # the reference is the sessions' level; the stored samples give its shape
        ref = float(np.exp(np.mean(np.log(levels))))
        if not math.isclose(ref, base_med, rel_tol=1e-12):  # sessions at one level: as stored
            base, base_med = base * (ref / base_med), ref
    head = (
        f"{name}: median {fmt_num(cur_med)} {unit} vs baseline {fmt_num(base_med)} {baseline.unit}"
    )

    jobs_note = ""  # set when the CI resamples jobs as units
    margin = 0.0  # set from MIN_SESSIONS baseline sessions on
    shifted = host_shift if host_shift != 1.0 else None

    def verdict(
        outcome: Outcome,
        reason: str,
        ratio: float | None = None,
        ci: tuple[float, float] | None = None,
        p_worse: float | None = None,
        p_better: float | None = None,
    ) -> Verdict:
        # Quote the p-value of the side the medians moved to: that is the evidence at issue.
        p = p_better if ratio_is_better(ratio) else p_worse
        detail = []
        if ratio is not None:
            detail.append(f"ratio {ratio:.3f}")
        if ci is not None:
            detail.append(
                f"{level * 100:g}% CI {ci[0]:.3f}\N{EN DASH}{ci[1]:.3f}"
                + (f" over {jobs_note}" if jobs_note else "")
            )
        if p is not None:
            detail.append(f"p={fmt_p(p)}")
        if s_b is not None:
            detail.append(
                f"sd {s_b * 100:.1f}% between {len(levels)} baseline sessions"
                + (
                    f" (its family's; its own {s_own * 100:.1f}%)"
                    if s_own is not None and s_b > s_own
                    else ""
                )
            )
        detail.append(f"tolerance {fmt_tol(tol)}")
        if shifted is not None:
            detail.append(
                f"host probed at {shifted:.2f}x the set's speed: a change claimed "
                f"beyond {edges[0]:.3f}\N{EN DASH}{edges[1]:.3f}"
            )
        mde = None if ci is None or ratio is None else min_effect(ratio, ci, edges, lower_better)
        msg = verdict_line(outcome, head, detail, reason)
        return Verdict.of(
            outcome,
            (cur_med, base_med),
            ratio,
            ci,
            (p_worse, p_better),
            (int(cur.size), int(base.size)),
            tolerance=tol,
            message=msg,
            reason=reason,
            baseline_sessions=len(levels),
            between_sessions_sd=s_b,
            session_margin=margin if s_b is not None else None,
            min_effect=mde,
            host_shift=shifted,
        )

    if baseline.unit != unit or baseline.direction != current.direction:
        return verdict(
            Outcome.INCONCLUSIVE,
            f"baseline is in {baseline.unit} ({baseline.direction.value} is better), this run in "
            f"{unit} ({current.direction.value} is better): update the baseline",
        )
    if cur.size < MIN_SAMPLES or base.size < MIN_SAMPLES:
        return verdict(
            Outcome.INCONCLUSIVE,
            f"too few samples ({cur.size} vs {base.size}; need {MIN_SAMPLES} each)",
        )
    if np.any(cur <= 0) or np.any(base <= 0):
        return verdict(Outcome.INCONCLUSIVE, "non-positive samples: ratio undefined")

    ratio = cur_med / base_med
    cur_jobs = job_parts(cur, current.extra.get("job_sizes"))
    base_jobs = job_parts(base, baseline.job_sizes)
    if len(cur_jobs) == len(base_jobs) == 1:
        b = block_length(min(cur.size, base.size))
        ci = _ratio_ci(blocks(cur, b), blocks(base, b), level, n_resamples, seed)
    else:
        ci = _jobs_ratio_ci(cur_jobs, base_jobs, level, n_resamples, seed)
        jobs_note = f"{len(cur_jobs)} vs {len(base_jobs)} jobs"
    # One-sided Mann-Whitney U on the raw samples: is this run stochastically larger/smaller?
    # (On block medians one burst-hit block among ~10 can veto a 20 % slowdown; the raw test's
    # overconfidence under autocorrelation is bounded by the block CI, which must also agree.)
    p_greater = float(scipy.stats.mannwhitneyu(cur, base, alternative="greater").pvalue)
    p_less = float(scipy.stats.mannwhitneyu(cur, base, alternative="less").pvalue)
    p_worse, p_better = (p_greater, p_less) if lower_better else (p_less, p_greater)
    if s_b is not None:
        q = 0.5 + level / 2.0
        z = float(scipy.stats.t.ppf(q, dof))
        margin = z * s_b * math.sqrt(1.0 + 1.0 / len(levels))
        ci = widened(ratio, ci, margin)
    outcome, reason = classify(
        ratio, ci, p_worse, p_better, lower_better, tol, alpha, edges=edges, pass_edges=pass_edges
    )
    down, up = edges
    if s_b is not None and outcome is Outcome.INCONCLUSIVE and 2.0 * margin > math.log(up / down):
        reason = (
            f"{BETWEEN_SESSIONS} wider than the tolerance band (sd {s_b * 100:.1f}% over "
            f"{len(levels)} sessions): more jobs cannot narrow it"
        )
    if s_b is None:
        # Without the spread between sessions the interval holds only this session's jobs: a
        # host whose speed moves between sessions (a 2-core VM's MPI jobs in two speed modes,
        # 1.22x apart for minutes) would pass for a change of the code, and a PASS would rule
        # out what it cannot. So the verdict claims nothing, and asks for no more jobs, until
        # the set has MIN_SESSIONS.
        got = verdict(outcome, reason, ratio, ci, p_worse, p_better)
        few = f"{FEW_SESSIONS} ({len(levels)} of {MIN_SESSIONS})"
        head = got.message.removeprefix(f"{outcome.value}: ")
        said = (
            f"{outcome.value} not claimed"
            if outcome is not Outcome.INCONCLUSIVE
            else f"the jobs alone: {reason}"
        )
        return replace(
            got,
            outcome=Outcome.INCONCLUSIVE,
            min_effect=None,
            reason=few,
            unclaimed=None if outcome is Outcome.INCONCLUSIVE else outcome,
            message=f"{Outcome.INCONCLUSIVE.value}: {head}; {said}: {few}; record "
            f"more sessions, hours apart",
        )
    return verdict(outcome, reason, ratio, ci, p_worse, p_better)


def classify(
    ratio: float,
    ci: tuple[float, float],
    p_worse: float,
    p_better: float,
    lower_is_better: bool,
    tolerance: float,
    alpha: float,
    edges: tuple[float, float] | None = None,
    pass_edges: tuple[float, float] | None = None,
) -> tuple[Outcome, str]:
    """The decision rule on precomputed statistics (pure); returns (outcome, reason).
    `edges`, `pass_edges`: the bands for a claim and for a PASS (host_band) when they are not
    band(tolerance)."""
    lo, hi = ci
    down, up = edges or band(tolerance)
    # "worse" means the ratio moved up for latency, down for bandwidth.
    if lower_is_better:
        worse_sig, better_sig = lo > 1.0, hi < 1.0
        worse_beyond, better_beyond = lo > up, hi < down
    else:
        worse_sig, better_sig = hi < 1.0, lo > 1.0
        worse_beyond, better_beyond = hi < down, lo > up
    worse_sig = worse_sig and p_worse < alpha
    better_sig = better_sig and p_better < alpha

    if worse_sig and worse_beyond:
        return Outcome.REGRESSION, "worse beyond tolerance"
    if better_sig and better_beyond:
        return Outcome.IMPROVEMENT, "better beyond tolerance"
    down, up = pass_edges or (down, up)
    if down >= up:
        return Outcome.INCONCLUSIVE, (
            "the host's speed (reference probe) spans the tolerance "
            "band: no change beyond it, none ruled out"
        )
    point_worse = ratio > up if lower_is_better else ratio < down
    point_better = ratio < down if lower_is_better else ratio > up
    if hi / lo > up / down:
        return Outcome.INCONCLUSIVE, "too noisy: CI wider than the tolerance band"
    if not (point_worse or point_better):
        return Outcome.PASS, "within tolerance"
    side = "worse" if point_worse else "better"
    if worse_sig if point_worse else better_sig:
        return Outcome.INCONCLUSIVE, f"{side} than tolerance, but the CI reaches inside it"
    return Outcome.INCONCLUSIVE, f"{side} than tolerance, but not significant"


def not_evidence(v: Verdict, why: str) -> Verdict:
    """`v` from a comparison that says nothing about the stack (`why`): a REGRESSION,
    IMPROVEMENT or PASS becomes INCONCLUSIVE with that reason (which fails only under
    --hpc-strict): "no change" against another machine's numbers claims as little as a change
    does. NEW and INCONCLUSIVE keep their verdict and carry the note."""
    if v.outcome not in (Outcome.REGRESSION, Outcome.IMPROVEMENT, Outcome.PASS):
        return replace(v, message=f"{v.message} [{why}]", informational=why)
    head = v.message.removeprefix(f"{v.outcome.value}: ")
    return replace(
        v,
        outcome=Outcome.INCONCLUSIVE,
        reason=why,
        informational=why,
        message=f"{Outcome.INCONCLUSIVE.value}: {head}; {v.outcome.value} not judged: {why}",
    )


def temper_for_shared_cores(v: Verdict, current: str, baseline: str = "") -> Verdict:
    """A verdict whose run (or whose baseline's run) measured another process's load as well
    as the stack (`current`/`baseline`: the contention guard's reason, "" when the cores were
    the job's own) is not evidence about the stack (not_evidence)."""
    if not (current or baseline):
        return v
    why = current or f"baseline measured on {baseline.replace('cores shared:', 'shared cores:')}"
    return not_evidence(v, why)
