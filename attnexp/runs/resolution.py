"""How finely a metric's value is known: a share of examples (an accuracy) moves in steps of one example and varies
by one binomial standard error; another metric (a loss, a perplexity) is judged at 1% of its value. Comparisons take
their default margins from here, and a run's budget is judged still improving by the same yardstick."""

from __future__ import annotations

import math

FRACTIONS = ("acc", "seq_acc", "exact")  # metric names (after the split) that are shares of examples: within [0, 1]
UNKNOWN_EXAMPLES_MARGIN = 0.01  # an accuracy's margin where the runs do not record their evaluated examples
RELATIVE_MARGIN = 0.01  # other metrics with a better direction (loss, perplexity): 1% of the value


def is_fraction(metric: str) -> bool:
    """Accuracies and other shares: ``test/acc``, ``val/acc_best``, ``test/acc@len=8``, ``test/seq_acc``,
    ``test/exact``."""
    name = metric.split("/", 1)[-1]
    return name.split("@")[0].removesuffix("_best") in FRACTIONS


def margin_at(metric: str, value: float, examples: int | None) -> tuple[float, str]:
    """The smallest difference of ``metric`` that matters at ``value``, and where it comes from: for a share, one
    binomial standard error on the ``examples`` evaluated, sqrt(p (1 - p) / N), at least 1 / N (one example), 0.01
    where N is unknown; otherwise 1% of the value (nan for a value of 0 or not finite)."""
    if is_fraction(metric):
        if not examples:
            return UNKNOWN_EXAMPLES_MARGIN, "default for unrecorded examples"
        p = min(max(value, 0.0), 1.0) if math.isfinite(value) else 0.5
        return max(math.sqrt(p * (1 - p) / examples), 1 / examples), f"1 SE at {examples} examples"
    if math.isfinite(value) and value != 0:
        return RELATIVE_MARGIN * abs(value), "1% of the baseline"
    return math.nan, "none"
