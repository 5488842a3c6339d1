"""Statistics for comparing configurations over seeds: Student-t intervals, paired and Welch t-tests and the sign
test (scipy), equivalence within a margin (two one-sided tests), Holm's adjustment and the seeds a power
calculation asks for (statsmodels). Values that are not finite never reach them: they are missing."""

from __future__ import annotations

import gc
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

LEVEL = 0.95  # confidence level of every interval
ALPHA = 0.05  # a (Holm-adjusted) p below this decides a verdict
POWER = 0.8  # the chance of deciding that "seeds would decide" plans for
MOST_SEEDS = 1000  # beyond this, "seeds would decide" says more than 1000
UNBOUNDED = (-math.inf, math.inf)


class Spread(NamedTuple):
    """Mean, sample standard deviation (n - 1) and the Student-t interval of the mean, cut at the metric's bounds;
    nan where n < 2."""

    n: int
    mean: float
    std: float
    low: float
    high: float


class Difference(NamedTuple):
    """Mean of (other - baseline) with its interval, the test's p-value and whether it lies within ±``margin``.

    ``p_adjusted`` and ``p_equivalent_adjusted`` are Holm's over the comparison's family (:func:`adjust`);
    ``seeds`` is the number of seeds per side that would decide at the observed spread (None: decided, or no
    estimate)."""

    test: str  # "paired t", "Welch t", "sign" (every paired difference the same), or "none" (a side has < 2 values)
    n: int  # paired seeds (the smaller side for Welch)
    mean: float
    low: float  # nan where the test has no interval (sign, none)
    high: float
    p: float
    margin: float = math.nan  # differences within ±margin do not matter (nan: no margin, no equivalence test)
    p_equivalent: float = math.nan  # two one-sided tests against ±margin
    sd: float = math.nan  # of the paired differences (paired) or of the two sides pooled (Welch)
    unpaired: tuple[str, ...] = ()  # seeds that only one side has, left out of a paired test
    p_adjusted: float = math.nan
    p_equivalent_adjusted: float = math.nan
    seeds: int | None = None


def finite(values: Mapping[str, Any]) -> dict[str, float]:
    """The values that are finite numbers."""
    return {k: float(v) for k, v in values.items() if isinstance(v, (int, float)) and math.isfinite(v)}


def clip(low: float, high: float, bounds: tuple[float, float]) -> tuple[float, float]:
    """An interval cut at the bounds of what it describes (an accuracy's interval ends at 1)."""
    return max(low, bounds[0]), min(high, bounds[1])


def spread(values: Sequence[float], bounds: tuple[float, float] = UNBOUNDED) -> Spread:
    """Describe ``values`` (one per seed; values that are not finite are left out)."""
    from scipy import stats

    kept = np.array([v for v in values if math.isfinite(v)], dtype=float)
    n = len(kept)
    if n == 0:
        return Spread(0, math.nan, math.nan, math.nan, math.nan)
    mean = float(kept.mean())
    if n == 1:
        return Spread(1, mean, math.nan, math.nan, math.nan)
    std = float(kept.std(ddof=1))
    half = stats.t.ppf(0.5 + LEVEL / 2, n - 1) * std / math.sqrt(n)
    return Spread(n, mean, std, *clip(mean - half, mean + half, bounds))


def difference(
    baseline: Mapping[str, float],
    other: Mapping[str, float],
    margin: float = math.nan,
    bounds: tuple[float, float] = UNBOUNDED,
) -> Difference:
    """other - baseline, by seed (values that are not finite left out). Paired on the seeds both have when they
    share at least 2 (the others named in ``unpaired``), Welch's t otherwise. Where every paired difference is the
    same, t is undefined and the exact sign test decides (it has no interval). ``bounds``: the metric's, so the
    difference's interval stays within what a difference can be."""
    from scipy import stats
    from statsmodels.stats.weightstats import ttost_ind, ttost_paired

    b, o = finite(baseline), finite(other)
    common = sorted(set(b) & set(o))
    unpaired = tuple(sorted(set(b) ^ set(o)))
    wide = (bounds[0] - bounds[1], bounds[1] - bounds[0])
    equivalence = margin > 0  # False for nan
    if len(common) >= 2:
        x, y = np.array([o[s] for s in common]), np.array([b[s] for s in common])
        d = x - y
        if np.all(d == d[0]):  # no spread in the differences (a discrete metric, say): t is undefined, use signs
            p = 1.0 if d[0] == 0 else sign_p(len(d), len(d), "two-sided")
            p_eq = (
                max(sign_p(int((d > -margin).sum()), len(d)), sign_p(int((d < margin).sum()), len(d)))
                if equivalence
                else math.nan
            )
            return Difference("sign", len(d), float(d[0]), math.nan, math.nan, p, margin, p_eq, 0.0, unpaired)
        result = stats.ttest_rel(x, y)
        p_eq = float(ttost_paired(x, y, -margin, margin)[0]) if equivalence else math.nan
        test, n, mean, sd = "paired t", len(d), float(d.mean()), float(d.std(ddof=1))
    elif len(b) >= 2 and len(o) >= 2:
        x, y = np.array(list(o.values())), np.array(list(b.values()))
        result = stats.ttest_ind(x, y, equal_var=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # identical values on both sides: the one-sided tests are undefined (nan)
            p_eq = float(ttost_ind(x, y, -margin, margin, usevar="unequal")[0]) if equivalence else math.nan
        test, n, mean, sd = (
            "Welch t",
            min(len(b), len(o)),
            float(x.mean() - y.mean()),
            math.sqrt((x.var(ddof=1) + y.var(ddof=1)) / 2),
        )
        unpaired = ()
    else:
        mean = mean_of(o) - mean_of(b)
        return Difference("none", min(len(b), len(o)), mean, math.nan, math.nan, math.nan, margin)
    interval = result.confidence_interval(LEVEL)
    low, high = clip(float(interval.low), float(interval.high), wide)
    return Difference(test, n, mean, low, high, float(result.pvalue), margin, p_eq, sd, unpaired)


def mean_of(values: Mapping[str, float]) -> float:
    """The mean of the values, nan for none."""
    return float(np.mean(list(values.values()))) if values else math.nan


def sign_p(agreeing: int, n: int, alternative: str = "greater") -> float:
    """The exact sign test's p for ``agreeing`` of ``n`` differences on the side tested."""
    from scipy import stats

    return float(stats.binomtest(agreeing, n, 0.5, alternative=alternative).pvalue)


def adjust(diffs: Sequence[Difference]) -> list[Difference]:
    """Holm's adjustment of the p-values of one family of comparisons (and of their equivalence tests), and the
    seeds that would decide each undecided one at the family's Bonferroni level."""
    from statsmodels.stats.multitest import multipletests

    def holm(ps: list[float]) -> list[float]:
        kept = [i for i, p in enumerate(ps) if math.isfinite(p)]
        adjusted = [math.nan] * len(ps)
        if kept:
            # statsmodels' Holm calls gc.collect(), which would walk every object of the process (0.1 s with torch)
            gc.freeze()
            try:
                holm_p = multipletests([ps[i] for i in kept], alpha=ALPHA, method="holm")[1]
            finally:
                gc.unfreeze()
            for i, p in zip(kept, holm_p):
                adjusted[i] = float(p)
        return adjusted

    family = max(1, sum(math.isfinite(d.p) for d in diffs))
    done = []
    for d, p, p_eq in zip(diffs, holm([d.p for d in diffs]), holm([d.p_equivalent for d in diffs])):
        d = d._replace(p_adjusted=p, p_equivalent_adjusted=p_eq)
        done.append(d._replace(seeds=None if decided(d) else seeds_to_decide(d, ALPHA / family)))
    return done


def decided(d: Difference) -> bool:
    """Whether ``d`` is equivalent, or a difference beyond its margin, at the (adjusted) level."""
    p, p_eq = first_finite(d.p_adjusted, d.p), first_finite(d.p_equivalent_adjusted, d.p_equivalent)
    return p_eq < ALPHA or (p < ALPHA and d.mean != 0 and not abs(d.mean) <= d.margin)


def first_finite(*values: float) -> float:
    return next((v for v in values if math.isfinite(v)), math.nan)


def seeds_to_decide(d: Difference, alpha: float) -> int | None:
    """Seeds per side for a test at ``alpha`` to decide with probability :data:`POWER`, were the true difference and
    spread those observed: to show the difference when it is larger than the margin (two-sided t), to show
    equivalence when it is smaller (one-sided t against the nearer bound, the one that binds). None: no estimate."""
    from statsmodels.stats.power import TTestIndPower, TTestPower

    if d.test == "none" or not math.isfinite(d.mean):
        return None
    size = abs(d.mean)
    if size < d.margin:
        effect, alternative = d.margin - size, "larger"
    elif size > 0 and size != d.margin:
        effect, alternative = size, "two-sided"
    else:
        return None
    if d.sd == 0:  # every difference the same: the sign test, were the next seeds to agree
        return next(
            (n for n in range(2, 64) if sign_p(n, n, "two-sided" if alternative == "two-sided" else "greater") < alpha),
            None,
        )
    solver = TTestPower() if d.test == "paired t" else TTestIndPower()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            n = solver.solve_power(effect_size=effect / d.sd, alpha=alpha, power=POWER, alternative=alternative)
        except (ValueError, RuntimeError, ZeroDivisionError):
            return None
    if not math.isfinite(n):  # the solver found no root: an effect so large that 2 seeds decide, or none
        return 2 if effect > d.sd else None
    return min(max(2, math.ceil(n)), MOST_SEEDS + 1)


def verdict(diff: Difference, higher_is_better: bool | None) -> str:
    """``better`` or ``worse`` (``higher``/``lower`` for a metric with no better direction): the adjusted p is below
    :data:`ALPHA` and the difference is larger than the margin; ``equivalent within ±margin``: both one-sided tests
    reject (adjusted); else ``inconclusive``, with the seeds that would decide."""
    if diff.test == "none":
        return f"n={diff.n}, no test"
    if first_finite(diff.p_equivalent_adjusted, diff.p_equivalent) < ALPHA:
        return f"equivalent within ±{diff.margin:.3g}"
    if decided(diff):
        if higher_is_better is None:
            return "higher" if diff.mean > 0 else "lower"
        return "better" if (diff.mean > 0) == higher_is_better else "worse"
    if diff.seeds is None:
        return "inconclusive"
    many = f"more than {MOST_SEEDS}" if diff.seeds > MOST_SEEDS else f"about {diff.seeds}"
    goal = "equivalence" if abs(diff.mean) < diff.margin else "a difference"
    return f"inconclusive: {many} seeds would show {goal}"
