"""The summary's warnings about its rows: sizes that differ from the baseline's, runs that learnt nothing, budgets
that ended while runs were still improving."""

from __future__ import annotations

from attnexp.comparison.chance import at_chance, best_acc, chance
from attnexp.comparison.tables import Row

PARAMS_TOLERANCE = 0.05  # compared configurations whose parameter counts differ by more are flagged (a gate's 8%)


def cautions(rows: list[Row], where: str = "") -> list[str]:
    """Parameter counts that differ from the row's baseline's by more than 5%; runs left at chance; rows whose runs
    were still improving when their budget ended. ``where``: the table's name, said first where there are several."""
    found = []
    by_config = {r.config: r for r in rows}
    for row in rows:
        own = by_config.get(row.baseline)
        if (
            own is not None
            and own.params
            and row.params
            and abs(row.params - own.params) > PARAMS_TOLERANCE * own.params
        ):
            found.append(
                f"{row.config} has {row.params:,} parameters, {row.params / own.params:.2f}x the baseline's "
                f"{own.params:,}: a difference may come from size, not from the mechanism."
            )
    for row in rows:
        for run in row.ok:
            if at_chance(run):
                found.append(
                    f"{row.config} seed {run.seed} stayed at chance: best val/acc {best_acc(run):.4f}, chance "
                    f"{chance(run):.4f}; it learnt nothing (learning rate, epochs?)."
                )
    for row in rows:
        improving = [r.seed for r in row.ok if r.metrics.get("still_improving") is True]
        if improving:
            monitor = row.ok[0].metrics.get("monitor", "the checkpoint metric")
            found.append(
                f"{row.config}: {len(improving)} of {len(row.ok)} runs (seed {', '.join(improving)}) were still "
                f"improving at their last epoch ({monitor} best there, and more than its margin above the best "
                "before the last quarter of the epochs): the budget ended before they did, and a longer one "
                "may change the verdicts that rest on them."
            )
    return [f"{where}: {w}" for w in found] if where else found
