"""Whether a finished run learnt anything: its best validation accuracy against the accuracy of guessing."""

from __future__ import annotations

import math

from attnexp.comparison.runs import Run

CHANCE_FACTOR = 1.5  # a run whose best validation accuracy is at most this many times chance learnt nothing
CHANCE_RULE = f"{CHANCE_FACTOR:g} times chance"


def chance(run: Run) -> float:
    """The accuracy of guessing: what the run's data measured (generated tasks: the best guess that does not solve
    the task), else 1 / classes; nan if unknown."""
    classes = run.metrics.get("classes")
    return float(run.metrics.get("chance") or (1 / classes if classes else math.nan))


def best_acc(run: Run) -> float:
    """The run's best validation accuracy (its last one for records without a best); nan if it has none."""
    acc = run.metrics.get("val/acc_best", run.metrics.get("val/acc"))
    return float(acc) if isinstance(acc, (int, float)) else math.nan


def at_chance(run: Run) -> bool:
    """Whether the run's best validation accuracy is at most ``CHANCE_FACTOR`` times chance: it learnt nothing."""
    return best_acc(run) <= CHANCE_FACTOR * chance(run)
