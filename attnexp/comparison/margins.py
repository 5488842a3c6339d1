"""What a metric's values can be (its bounds) and how large a difference must be to matter (its margin)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from attnexp.comparison.stats import UNBOUNDED
from attnexp.runs.folders import Run

FRACTIONS = ("acc", "seq_acc", "exact")  # metric names (after the split) that are shares of examples: within [0, 1]
UNKNOWN_EXAMPLES_MARGIN = 0.01  # an accuracy's margin where the runs do not record their evaluated examples
RELATIVE_MARGIN = 0.01  # other metrics with a better direction (loss, perplexity): 1% of the baseline's mean


def is_fraction(metric: str) -> bool:
    """Accuracies and other shares: ``test/acc``, ``val/acc_best``, ``test/acc@len=8``, ``test/seq_acc``, ``test/exact``."""
    name = metric.split("/", 1)[-1]
    return name.split("@")[0].removesuffix("_best") in FRACTIONS


def bounds(metric: str) -> tuple[float, float]:
    """[0, 1] for shares; unbounded otherwise (intervals are cut where a metric cannot go)."""
    return (0.0, 1.0) if is_fraction(metric) else UNBOUNDED


def examples(runs: list[Run], metric: str) -> int | None:
    """The fewest examples the runs evaluated ``metric`` on (its split: ``test/`` or ``val/``), None if unrecorded."""
    split = metric.split("/", 1)[0]
    counts = [r.metrics["examples"].get(split) for r in runs if isinstance(r.metrics.get("examples"), dict)]
    counts = [int(c) for c in counts if isinstance(c, (int, float)) and c > 0]
    return min(counts) if counts else None


def margin(metric: str, mode: str, baseline_runs: list[Run], baseline_mean: float, given: Mapping[str, float]) -> tuple[float, str]:
    """The margin of ``metric`` against a baseline, and where it comes from.

    ``given`` (``compare.margin``) first. A share: one binomial standard error at the baseline's mean on the
    examples evaluated, sqrt(p (1 - p) / N), and at least 1 / N (one example); 0.01 where N is not recorded.
    Another metric with a better direction: 1% of the baseline's mean. None (nan) for a metric with no direction."""
    if metric in given:
        return float(given[metric]), "given"
    if is_fraction(metric):
        n = examples(baseline_runs, metric)
        if n is None:
            return UNKNOWN_EXAMPLES_MARGIN, "default for unrecorded examples"
        p = min(max(baseline_mean, 0.0), 1.0) if math.isfinite(baseline_mean) else 0.5
        return max(math.sqrt(p * (1 - p) / n), 1 / n), f"1 SE at {n} examples"
    if mode and math.isfinite(baseline_mean) and baseline_mean != 0:
        return RELATIVE_MARGIN * abs(baseline_mean), "1% of the baseline"
    return math.nan, "none"
