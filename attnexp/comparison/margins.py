"""What a metric's values can be (its bounds) and how large a difference must be to matter (its margin)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from attnexp.comparison.runs import Run
from attnexp.comparison.stats import UNBOUNDED
from attnexp.runs.resolution import is_fraction, margin_at, scored_units


def bounds(metric: str) -> tuple[float, float]:
    """[0, 1] for shares; unbounded otherwise (intervals are cut where a metric cannot go)."""
    return (0.0, 1.0) if is_fraction(metric) else UNBOUNDED


def scored(runs: list[Run], metric: str) -> int | None:
    """The fewest predictions the runs' ``metric`` counts (tokens for next-token accuracy, answer tokens for a recall
    task, images for a classifier: their records' ``scored``), None where no record says."""
    counts = [n for r in runs if (n := scored_units(r.metrics, metric)) is not None]
    return min(counts) if counts else None


def margin(
    metric: str, mode: str, baseline_runs: list[Run], baseline_mean: float, given: Mapping[str, float]
) -> tuple[float, str]:
    """The margin of ``metric`` against a baseline, and where it comes from.

    ``given`` (``compare.margin``) first. A share: one binomial standard error at the baseline's mean on the
    predictions it counts, sqrt(p (1 - p) / N), and at least 1 / N (one prediction); 0.01 where N is not recorded.
    Another metric with a better direction: 1% of the baseline's mean. None (nan) for a metric with no direction."""
    if metric in given:
        return float(given[metric]), "given"
    if is_fraction(metric) or mode:
        return margin_at(metric, baseline_mean, scored(baseline_runs, metric))
    return math.nan, "none"


def given(items: Sequence[str]) -> dict[str, float]:
    """Margins as typed (``["test/acc=0.005"]``) as ``{"test/acc": 0.005}``; a clear error for anything else."""
    found = {}
    for item in items:
        metric, _, value = item.partition("=")
        try:
            found[metric] = float(value)
        except ValueError:
            found[metric] = -1.0
        if not metric or not found[metric] >= 0:
            raise ValueError(
                f"--margin {item!r} is not METRIC=VALUE with a value of at least 0, e.g. "
                "--margin test/acc=0.005 test/loss=0.01."
            )
    return found
