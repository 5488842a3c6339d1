"""How finely a metric's value is known: a share (an accuracy) moves in steps of one scored prediction and varies by
one binomial standard error on the predictions it counts (the tokens of next-token windows, the answer tokens of a
recall task, the images of a classifier: ``scored`` in a run's record); another metric (a loss, a perplexity) is
judged at 1% of its value. Comparisons take their default margins from here, and a run's budget is judged still
improving by the same yardstick (:func:`judge`): its best validation value (the earliest of equal ones, as the
checkpoint keeps it) at its last validated epoch, beating the best before the last quarter of its epochs by more than
the margin. One validation says nothing of a trend."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

FRACTIONS = ("acc", "seq_acc", "exact")  # metric names (after the split) that are shares of examples: within [0, 1]
UNKNOWN_EXAMPLES_MARGIN = 0.01  # an accuracy's margin where the runs do not record what it counts
RELATIVE_MARGIN = 0.01  # other metrics with a better direction (loss, perplexity): 1% of the value


def is_fraction(metric: str) -> bool:
    """Accuracies and other shares: ``test/acc``, ``val/acc_best``, ``test/acc@len=8``, ``test/seq_acc``,
    ``test/exact``."""
    name = metric.split("/", 1)[-1]
    return name.split("@")[0].removesuffix("_best") in FRACTIONS


def scored_units(record: Mapping[str, Any], metric: str) -> int | None:
    """How many predictions ``metric`` counts in a run's record (``scored``: split -> metric name -> count, written
    by the task from the data), None where the record does not say: ``val/acc_best`` counts what ``val/acc`` does."""
    split, _, name = metric.partition("/")
    count = ((record.get("scored") or {}).get(split) or {}).get(name.removesuffix("_best"))
    return int(count) if isinstance(count, (int, float)) and count > 0 else None


def margin_at(metric: str, value: float, scored: int | None) -> tuple[float, str]:
    """The smallest difference of ``metric`` that matters at ``value``, and where it comes from: for a share, one
    binomial standard error on the ``scored`` predictions it counts, sqrt(p (1 - p) / N), at least 1 / N (one
    prediction), 0.01 where N is unknown; otherwise 1% of the value (nan for a value of 0 or not finite)."""
    if is_fraction(metric):
        if not scored:
            return UNKNOWN_EXAMPLES_MARGIN, "default where the scored predictions are not recorded"
        p = min(max(value, 0.0), 1.0) if math.isfinite(value) else 0.5
        return max(math.sqrt(p * (1 - p) / scored), 1 / scored), f"1 SE at {scored} scored predictions"
    if math.isfinite(value) and value != 0:
        return RELATIVE_MARGIN * abs(value), "1% of the baseline"
    return math.nan, "none"


def judge(history: Sequence[Sequence[float]], monitor: str, mode: str, examples: int | None) -> dict[str, Any]:
    """The verdict on a budget from ``history``, ``[[epoch, value], ...]`` of ``monitor`` (``mode`` ``max`` or ``min``):
    ``still_improving`` (None with fewer than 2 validations) and the numbers it rests on."""
    values = [(int(epoch), float(value)) for epoch, value in history if math.isfinite(float(value))]
    if len(values) < 2:
        return {"still_improving": None, "validations": len(values)}
    sign = 1.0 if mode == "max" else -1.0
    best_epoch = max(values, key=lambda item: (sign * item[1], -item[0]))[0]
    last_epoch, last = values[-1]
    quarter = math.ceil(len(values) / 4)
    before = max(sign * v for _, v in values[:-quarter])
    gain = sign * last - before
    margin, _ = margin_at(monitor, last, examples)
    improving = best_epoch == last_epoch and gain > (margin if math.isfinite(margin) else 0.0)
    return {
        "still_improving": improving,
        "validations": len(values),
        "best_epoch": best_epoch,
        "last_epoch": last_epoch,
        "last_quarter_gain": gain,
        "margin": margin,
    }
