"""Statistics for comparing configurations over seeds: Student-t intervals, paired and Welch t-tests (scipy)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import NamedTuple

LEVEL = 0.95  # confidence level of every interval
ALPHA = 0.05  # a difference with p below this is reported as real


class Spread(NamedTuple):
    """Mean, sample standard deviation (n - 1) and the Student-t interval of the mean; nan where n < 2."""

    n: int
    mean: float
    std: float
    low: float
    high: float


class Difference(NamedTuple):
    """Mean of (other - baseline) with its interval and the test's p-value; ``test`` names the test."""

    test: str  # "paired t", "Welch t", "sign" (every paired difference the same), or "none" (a side has < 2 values)
    n: int  # seeds per side (the smaller side for Welch)
    mean: float
    low: float
    high: float
    p: float


def spread(values: list[float]) -> Spread:
    """Describe ``values`` (one per seed)."""
    from scipy import stats

    n = len(values)
    if n == 0:
        return Spread(0, math.nan, math.nan, math.nan, math.nan)
    mean = statistics.fmean(values)
    if n == 1:
        return Spread(1, mean, math.nan, math.nan, math.nan)
    std = statistics.stdev(values)
    half = stats.t.ppf(0.5 + LEVEL / 2, n - 1) * std / math.sqrt(n)
    return Spread(n, mean, std, mean - half, mean + half)


def difference(baseline: Mapping[str, float], other: Mapping[str, float]) -> Difference:
    """other - baseline, by seed. Paired t when both have the same seeds (at least 2), Welch's t otherwise; where
    every paired difference is the same the t statistic is undefined and the exact sign test decides."""
    from scipy import stats

    b, o = list(baseline.values()), list(other.values())
    if len(b) < 2 or len(o) < 2:
        mean = statistics.fmean(o) - statistics.fmean(b) if b and o else math.nan
        return Difference("none", min(len(b), len(o)), mean, math.nan, math.nan, math.nan)
    if set(baseline) == set(other):
        seeds = sorted(baseline)
        diffs = [other[s] - baseline[s] for s in seeds]
        if len(set(diffs)) == 1:  # no spread in the differences (a discrete metric, say): t is undefined, use signs
            p = 1.0 if diffs[0] == 0 else float(stats.binomtest(len(diffs), len(diffs), 0.5).pvalue)
            return Difference("sign", len(seeds), diffs[0], diffs[0], diffs[0], p)
        result = stats.ttest_rel([other[s] for s in seeds], [baseline[s] for s in seeds])
        test, n = "paired t", len(seeds)
    else:
        result = stats.ttest_ind(o, b, equal_var=False)
        test, n = "Welch t", min(len(b), len(o))
    interval = result.confidence_interval(LEVEL)
    return Difference(test, n, statistics.fmean(o) - statistics.fmean(b), float(interval.low), float(interval.high), float(result.pvalue))


def verdict(diff: Difference, higher_is_better: bool | None) -> str:
    """``better``, ``worse`` or ``no detectable difference at n=...`` for ``other`` against the baseline; ``higher``
    or ``lower`` for a metric with no better direction (``higher_is_better`` None)."""
    if diff.test == "none":
        return f"n={diff.n}, no test"
    if math.isnan(diff.p) or diff.p >= ALPHA or diff.mean == 0:
        return f"no detectable difference at n={diff.n}"
    if higher_is_better is None:
        return "higher" if diff.mean > 0 else "lower"
    return "better" if (diff.mean > 0) == higher_is_better else "worse"
