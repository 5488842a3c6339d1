"""What a metric's values can be (its bounds) and how large a difference must be to matter (its margin)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from attnexp.comparison.runs import Run
from attnexp.comparison.stats import UNBOUNDED
from attnexp.runs.resolution import is_fraction, margin_at


def bounds(metric: str) -> tuple[float, float]:
    """[0, 1] for shares; unbounded otherwise (intervals are cut where a metric cannot go)."""
    return (0.0, 1.0) if is_fraction(metric) else UNBOUNDED


def examples(runs: list[Run], metric: str) -> int | None:
    """The fewest examples the runs evaluated ``metric`` on (its split: ``test/`` or ``val/``), None if unrecorded."""
    split = metric.split("/", 1)[0]
    counts = [r.metrics["examples"].get(split) for r in runs if isinstance(r.metrics.get("examples"), dict)]
    counts = [int(c) for c in counts if isinstance(c, (int, float)) and c > 0]
    return min(counts) if counts else None


def margin(
    metric: str, mode: str, baseline_runs: list[Run], baseline_mean: float, given: Mapping[str, float]
) -> tuple[float, str]:
    """The margin of ``metric`` against a baseline, and where it comes from.

    ``given`` (``compare.margin``) first. A share: one binomial standard error at the baseline's mean on the
    examples evaluated, sqrt(p (1 - p) / N), and at least 1 / N (one example); 0.01 where N is not recorded.
    Another metric with a better direction: 1% of the baseline's mean. None (nan) for a metric with no direction."""
    if metric in given:
        return float(given[metric]), "given"
    if is_fraction(metric) or mode:
        return margin_at(metric, baseline_mean, examples(baseline_runs, metric))
    return math.nan, "none"
