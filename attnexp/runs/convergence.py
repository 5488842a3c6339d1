"""Whether a run's budget ended while it was still improving: judged on its checkpoint metric's validation values.

The rule: a run is still improving when its best validation value (the earliest of equal values, as the checkpoint
keeps it) is at its last validated epoch, and that value beats the best of the epochs before the last quarter (the last
ceil(E / 4) of E validated epochs) by more than the metric's margin at that value
(:func:`attnexp.runs.resolution.margin_at`: one standard error of an accuracy on the validation examples, 1% of a
loss). One validation says nothing of a trend: no judgement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from attnexp.runs.resolution import margin_at


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
