"""Sweeps over several data options and difficulties: a data x mixers table with a mean score per mixer, and
curves of the primary metric against a numeric setting the sweep varies (``data.num_pairs``, say)."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from attnexp.comparison.chance import at_chance
from attnexp.comparison.stats import Spread, spread
from attnexp.comparison.tables import Comparison, seed_order
from attnexp.runs.folders import Run

NOT_KNOBS = ("seed", "model", "data")


@dataclass
class Suite:
    """Each data option's primary metric (the first its task names) per mixer, and each mixer's mean over them."""

    data: list[str]  # data choices
    mixers: list[str]  # configurations without the data choice
    metric: dict[str, str]  # data -> its primary metric
    cells: dict[tuple[str, str], Spread] = field(default_factory=dict)  # (mixer, data) -> over seeds
    at_chance: dict[tuple[str, str], int] = field(default_factory=dict)  # (mixer, data) -> runs left at chance
    scores: dict[str, Spread] = field(default_factory=dict)  # mixer -> per seed, the mean over the data


def primary_metric(runs: list[Run]) -> str:
    """The first metric the runs' task names in its summary (``test/acc``)."""
    return next((name for r in runs for name, _ in r.metrics.get("summary") or []), "test/acc")


def suite(c: Comparison) -> Suite | None:
    """The data x mixers view of ``c``, or None when its runs do not vary the data."""
    data = sorted({r.settings["data"] for r in c.runs if "data" in r.settings})
    if len(data) < 2:
        return None
    runs_of: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in c.runs:
        runs_of[run.config(leave_out=["data"]), run.settings["data"]].append(run)
    mixers = sorted({m for m, _ in runs_of})
    metric = {d: primary_metric([r for (_, on), rs in runs_of.items() if on == d for r in rs]) for d in data}
    s = Suite(data, mixers, metric)
    for mixer in mixers:
        by_seed: dict[str, list[float]] = defaultdict(list)
        for d in data:
            ok = [r for r in runs_of.get((mixer, d), []) if r.ok and isinstance(r.metrics.get(metric[d]), (int, float))]
            s.cells[mixer, d] = spread([float(r.metrics[metric[d]]) for r in ok])
            s.at_chance[mixer, d] = sum(at_chance(r) for r in ok)
            for r in ok:
                by_seed[r.seed].append(float(r.metrics[metric[d]]))
        complete = [statistics.fmean(v) for seed, v in sorted(by_seed.items(), key=lambda i: seed_order(i[0])) if len(v) == len(data)]
        s.scores[mixer] = spread(complete)
    return s


def csv_rows(s: Suite) -> list[dict[str, object]]:
    """One row per mixer and data option, and per mixer its mean score."""
    rows = []
    for m in s.mixers:
        for d in [*s.data, "mean score"]:
            x = s.scores[m] if d == "mean score" else s.cells[m, d]
            rows.append({"mixer": m, "data": d, "metric": s.metric.get(d, "mean"), "n": x.n, "mean": x.mean,
                         "ci_low": x.low, "ci_high": x.high, "at_chance": s.at_chance.get((m, d), "")})
    return rows


def knobs(runs: list[Run], tuned: list[str]) -> list[str]:
    """Settings the runs vary, numeric in every run that has them, other than the seed, mixer, data and tuned keys."""
    found = []
    for key in sorted({k for r in runs for k in r.settings} - set(NOT_KNOBS) - set(tuned)):
        values = {r.settings[key] for r in runs if key in r.settings}
        if len(values) > 1 and all(as_number(v) is not None for v in values):
            found.append(key)
    return found


def as_number(text: str) -> float | None:
    """``text`` read as a number, or None."""
    try:
        return float(text)
    except ValueError:
        return None


def knob_curves(runs: list[Run], key: str, metric: str) -> dict[str, list[tuple[float, Spread]]]:
    """Per configuration (``key`` left out): ``metric`` over seeds at each value of ``key``, by value."""
    points: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        if r.ok and key in r.settings and isinstance(r.metrics.get(metric), (int, float)):
            points[r.config(leave_out=[key])][as_number(r.settings[key])].append(float(r.metrics[metric]))
    return {name: [(x, spread(v)) for x, v in sorted(by_x.items())] for name, by_x in sorted(points.items())}
