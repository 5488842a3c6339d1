"""The comparison statistics against formulas computed here (scipy's t distribution) and known cases."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy import stats as sp

from attnexp.comparison.stats import Difference, difference, spread, verdict


def test_spread_is_the_student_t_interval():
    values = [0.91, 0.94, 0.925, 0.9]
    s = spread(values)
    sem = statistics.stdev(values) / math.sqrt(4)
    low, high = sp.t.interval(0.95, 3, loc=statistics.fmean(values), scale=sem)
    assert s.n == 4 and s.mean == pytest.approx(0.91875) and s.std == pytest.approx(statistics.stdev(values))
    assert (s.low, s.high) == (pytest.approx(low), pytest.approx(high))
    assert s.high - s.low == pytest.approx(2 * 3.182446305 * sem, rel=1e-6)  # t(0.975, 3) from tables


def test_one_seed_has_no_spread_and_no_test():
    s = spread([0.5])
    assert s.n == 1 and s.mean == 0.5 and math.isnan(s.std) and math.isnan(s.low)
    d = difference({"0": 0.5}, {"0": 0.6})
    assert d.test == "none" and d.mean == pytest.approx(0.1) and math.isnan(d.p)
    assert verdict(d, higher_is_better=True) == "n=1, no test"


def test_same_seeds_are_paired():
    base, other = {"0": 1.0, "1": 2.0, "2": 3.0}, {"0": 1.5, "1": 2.7, "2": 3.4}
    d = difference(base, other)
    diffs = [0.5, 0.7, 0.4]
    t = statistics.fmean(diffs) / (statistics.stdev(diffs) / math.sqrt(3))
    assert t == pytest.approx(6.0474, rel=1e-4)
    assert d.test == "paired t" and d.n == 3 and d.mean == pytest.approx(statistics.fmean(diffs))
    assert d.p == pytest.approx(2 * sp.t.sf(t, 2)) and d.p == pytest.approx(0.02627, rel=1e-3)
    half = sp.t.ppf(0.975, 2) * statistics.stdev(diffs) / math.sqrt(3)
    assert (d.low, d.high) == (pytest.approx(d.mean - half), pytest.approx(d.mean + half))


def test_different_seeds_use_welch():
    base, other = {"0": 0.90, "1": 0.92, "2": 0.91}, {"3": 0.95, "4": 0.97, "5": 0.99, "6": 0.96}
    d = difference(base, other)
    a, b = list(other.values()), list(base.values())
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    t = (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    assert d.test == "Welch t" and d.n == 3
    assert d.p == pytest.approx(2 * sp.t.sf(abs(t), df))
    half = sp.t.ppf(0.975, df) * math.sqrt(va + vb)
    assert (d.low, d.high) == (pytest.approx(d.mean - half), pytest.approx(d.mean + half))


@pytest.mark.parametrize(
    "mean,p,higher,expected",
    [
        (0.02, 0.01, True, "better"),
        (-0.02, 0.01, True, "worse"),
        (0.02, 0.01, False, "worse"),
        (-0.3, 0.049, False, "better"),
        (0.02, 0.05, True, "inconclusive"),
        (0.02, 0.2, False, "inconclusive"),
    ],
)
def test_verdict_thresholds(mean, p, higher, expected):
    assert verdict(Difference("paired t", 3, mean, mean - 0.01, mean + 0.01, p), higher) == expected


def test_identical_differences_fall_back_to_the_sign_test_which_has_no_interval():
    d = difference({"0": 0.5, "1": 0.75}, {"0": 0.625, "1": 0.875})  # exact binary fractions: equal differences
    assert d.test == "sign" and d.mean == 0.125 and d.p == 0.5 and verdict(d, True) == "inconclusive"
    assert math.isnan(d.low) and math.isnan(
        d.high
    )  # the sign test gives no interval: none is shown, not a zero-width one
    six = difference({str(s): 0.5 for s in range(6)}, {str(s): 0.25 for s in range(6)})
    assert six.p == pytest.approx(2 * 0.5**6) and verdict(six, True) == "worse"  # 0.03125: all six lower
    same = difference({"0": 0.5, "1": 0.75}, {"0": 0.5, "1": 0.75})
    assert same.p == 1.0 and verdict(same, True) == "inconclusive"


def test_a_metric_without_direction_says_higher_or_lower():
    assert verdict(Difference("paired t", 3, 0.2, 0.1, 0.3, 0.01), None) == "higher"
    assert verdict(Difference("paired t", 3, -0.2, -0.3, -0.1, 0.01), None) == "lower"
    assert verdict(Difference("paired t", 3, -0.2, -0.3, 0.1, 0.2), None) == "inconclusive"
