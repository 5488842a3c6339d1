"""Whether two configurations may be compared at all, and what a verdict between them rests on: equal budgets
(``trainer.max_epochs``, steps, time caps, batches per epoch), equal tuning grids, enough seeds and budgets that
finished (runs no longer improving: :mod:`attnexp.runs.resolution`), runs that learnt something."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from attnexp.comparison.chance import at_chance
from attnexp.comparison.runs import Run
from attnexp.comparison.suite import seed_order
from attnexp.runs.settings import BUDGET, flat, method


class Row(Protocol):
    """A configuration's row (:class:`attnexp.comparison.tables.Row`): what these checks read of it."""

    config: str
    grid: dict[str, tuple[str, ...]]
    members: list[Run]

    @property
    def ok(self) -> list[Run]: ...


FEWEST_SEEDS = 3  # a verdict from fewer paired seeds says so
NOT_RERUN = ("seed", "resume")  # keys left out of a command that completes a comparison


def budget(runs: Sequence[Run], ignore: Sequence[str] = ()) -> dict[str, tuple[str, ...]]:
    """The budget keys' values over ``runs``: ``{"trainer.max_epochs": ("5",)}`` (from the recorded settings)."""
    found: dict[str, set[str]] = {}
    for run in runs:
        settings = flat(method(run.metrics["config"], ignore))
        for key in BUDGET:
            if key not in ignore:
                found.setdefault(key, set()).add(settings.get(key, "absent"))
    return {k: tuple(sorted(v)) for k, v in found.items()}


def values(found: tuple[str, ...]) -> str:
    return found[0] if len(found) == 1 else "{" + ", ".join(found) + "}"


def command(run_like: Sequence[Run], setting: dict[str, str]) -> str:
    """``attnexp --multirun ...``: the command of the runs of one configuration (their overrides, seed aside) with
    ``setting`` changed, over the seeds they ran."""
    typed = dict(o.split("=", 1) for o in (run_like[0].overrides if run_like else []) if "=" in o)
    typed = {k: v for k, v in typed.items() if k.lstrip("+~") not in (*NOT_RERUN, *setting)}
    if "model" not in typed and run_like:
        typed = {"model": str(run_like[0].metrics.get("mixer")), **typed}
    seeds = ",".join(sorted({r.seed for r in run_like}, key=seed_order))
    return " ".join(["attnexp --multirun", *(f"{k}={v}" for k, v in {**typed, **setting}.items()), f"seed={seeds}"])


def unequal_budget(row: Row, against: Row, ignore: Sequence[str] = ()) -> str | None:
    """Why ``row`` cannot be compared with ``against``: their budgets differ; with the command that gives ``against``
    the budget of ``row``. None where they are equal, or unknown."""
    mine, theirs = budget(row.ok, ignore), budget(against.ok, ignore)
    differ = [k for k in BUDGET if k in mine and k in theirs and mine[k] != theirs[k]]
    if not differ:
        return None
    said = ", ".join(f"{k}={values(theirs[k])}" for k in differ), ", ".join(f"{k}={values(mine[k])}" for k in differ)
    rerun = {k: mine[k][0] for k in differ if len(mine[k]) == 1 and mine[k][0] != "absent"}
    fix = f"; to match: {command(against.ok, rerun)}" if len(rerun) == len(differ) else ""
    return f"not comparable: {against.config} trained with {said[0]}, {row.config} with {said[1]}{fix}"


def unequal_grid(row: Row, against: Row) -> str | None:
    """Why a tuned ``row`` cannot be compared with the tuned ``against``: they were tuned over different values; with
    the commands that complete each grid."""
    keys = [k for k in {**row.grid, **against.grid} if row.grid.get(k) != against.grid.get(k)]
    if not keys:
        return None
    said = "; ".join(
        f"{against.config} tuned over {{{', '.join(against.grid.get(k, ()))}}}, {row.config} over "
        f"{{{', '.join(row.grid.get(k, ()))}}}"
        for k in keys
    )
    fixes = []
    for side, other in ((against, row), (row, against)):
        for key in keys:
            missing = [v for v in other.grid.get(key, ()) if v not in side.grid.get(key, ())]
            if missing:
                fixes.append(command(side.members, {key: ",".join(missing)}))
    return f"not comparable: {said}; to tune alike: {' and '.join(fixes)}" if fixes else f"not comparable: {said}"


def caveats(row: Row, against: Row, paired: int) -> list[str]:
    """What a verdict between ``row`` and ``against`` rests on that a reader should know: fewer than
    :data:`FEWEST_SEEDS` seeds, runs still improving when their budget ended."""
    found = []
    if paired < FEWEST_SEEDS:
        found.append(f"only {paired} seeds")
    runs = [*row.ok, *against.ok]
    improving = sum(r.metrics.get("still_improving") is True for r in runs)
    if improving:
        found.append(f"{improving} of {len(runs)} runs still improving at their last epoch")
    return found


def all_at_chance(row: Row, against: Row) -> bool:
    """Whether every finished run of both configurations stayed at chance: their verdict compares nothing learnt, and
    says so first (an "equivalent" or a seed count reads otherwise as a finding)."""
    runs = [*row.ok, *against.ok]
    return bool(runs) and all(at_chance(r) for r in runs)


def still_improving(row: Row) -> str:
    """``2/3``: the row's finished runs still improving when their budget ended; ``-`` where no run was judged."""
    judged = [r for r in row.ok if isinstance(r.metrics.get("still_improving"), bool)]
    return f"{sum(r.metrics['still_improving'] for r in judged)}/{len(judged)}" if judged else "-"
