"""Comparisons over several tables (data options) and difficulties: a data x mixers table, aggregates over the data
that hold with few seeds (the rliable protocol: Agarwal et al., NeurIPS 2021), and curves of the primary metric
against a numeric setting the sweep varies (``data.num_pairs``, say)."""

from __future__ import annotations

import math
import statistics
import warnings
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from attnexp.comparison.chance import at_chance, chance
from attnexp.comparison.margins import bounds
from attnexp.comparison.runs import Run
from attnexp.comparison.stats import LEVEL, Spread, spread
from attnexp.runs.resolution import is_fraction

NOT_KNOBS = ("seed", "model", "data")
REPS = 2000  # bootstrap replications of every aggregate's interval
BOOTSTRAP_SEED = 0  # the same runs give the same intervals
TAUS = np.linspace(0.0, 1.0, 51)  # the normalised scores a performance profile is read at


@dataclass
class Estimate:
    """A point estimate with its stratified bootstrap interval (nan where fewer than 2 seeds ran every data option)."""

    value: float
    low: float = math.nan
    high: float = math.nan


@dataclass
class Aggregates:
    """Per mixer, over the data options: normalised scores (chance 0, the best attainable 1) of the seeds that ran
    every one, their interquartile mean and mean, and the probability of improvement over the baseline mixer."""

    data: list[str]  # the data options aggregated
    left_out: list[str]  # data options that cannot be normalised, with the reason
    baseline: str  # the mixer improvement is measured over ("" if the suite has none)
    scores: dict[str, np.ndarray] = field(default_factory=dict)  # mixer -> (seeds, data)
    seeds: dict[str, list[str]] = field(default_factory=dict)  # mixer -> the seeds of those rows
    iqm: dict[str, Estimate] = field(default_factory=dict)
    mean: dict[str, Estimate] = field(default_factory=dict)
    improvement: dict[str, Estimate] = field(default_factory=dict)  # mixer -> P(mixer > baseline), per data averaged
    profiles: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(
        default_factory=dict
    )  # share of runs above TAUS


@dataclass
class Suite:
    """Each data option's primary metric (the first its task names) per mixer, and the aggregates over them."""

    data: list[str]  # data choices
    mixers: list[str]  # configurations without the data choice
    metric: dict[str, str]  # data -> its primary metric
    cells: dict[tuple[str, str], Spread] = field(default_factory=dict)  # (mixer, data) -> over seeds
    at_chance: dict[tuple[str, str], int] = field(default_factory=dict)  # (mixer, data) -> runs left at chance
    chance: dict[str, float] = field(default_factory=dict)  # data -> the chance its runs recorded
    aggregates: Aggregates | None = None


def seed_order(seed: str) -> tuple[int, str]:
    return (int(seed), "") if seed.lstrip("-").isdigit() else (0, seed)


def value(run: Run, metric: str) -> float:
    """The run's finite value of ``metric``, else nan."""
    v = run.metrics.get(metric)
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else math.nan


def suite(views: list[tuple[str, dict[str, list[Run]], str]], baseline: str) -> Suite | None:
    """The data x mixers view of the comparison's tables (``views``: each table's name, its runs by configuration and
    its primary metric), the mixers compared with the one ``baseline``'s settings name; None for a single table."""
    if len(views) < 2:
        return None
    data = [label.removeprefix("data=") for label, _, _ in views]
    runs_of = {(config, d): runs for d, (_, rows, _) in zip(data, views) for config, runs in rows.items()}
    mixers = sorted({m for m, _ in runs_of})
    s = Suite(data, mixers, {d: metric for d, (_, _, metric) in zip(data, views)})
    for d in data:
        levels = [chance(r) for (_, on), rs in runs_of.items() if on == d for r in rs if math.isfinite(chance(r))]
        s.chance[d] = statistics.median(levels) if levels else math.nan
    for mixer in mixers:
        for d in data:
            ok = [r for r in runs_of.get((mixer, d), []) if r.ok]
            s.cells[mixer, d] = spread([value(r, s.metric[d]) for r in ok], bounds(s.metric[d]))
            s.at_chance[mixer, d] = sum(at_chance(r) for r in ok)
    wanted = [part for part in baseline.split(",") if part and not part.startswith("data=")]
    base = next((m for m in mixers if wanted and all(w in m.split(",") for w in wanted)), "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arch's note that it will prefer a Generator to a RandomState
        s.aggregates = aggregates(s, runs_of, base)
    return s


def aggregates(s: Suite, runs_of: dict[tuple[str, str], list[Run]], baseline: str) -> Aggregates:
    """Normalised scores and their aggregates with stratified bootstrap 95% intervals (rliable), per mixer."""
    from rliable import library as rly
    from rliable import metrics as rm

    modes = {
        d: dict(r.metrics.get("summary") or []).get(s.metric[d], "max")
        for (_, d), rs in runs_of.items()
        for r in rs[:1]
    }
    usable = [d for d in s.data if is_fraction(s.metric[d]) and modes.get(d) == "max" and s.chance[d] < 1]
    left_out = [f"{d} ({s.metric[d]} is not an accuracy with a known chance)" for d in s.data if d not in usable]
    agg = Aggregates(usable, left_out, baseline)
    if not usable:
        return agg
    for mixer in s.mixers:
        by_seed: dict[str, dict[str, float]] = defaultdict(dict)
        for d in usable:
            for r in runs_of.get((mixer, d), []):
                if r.ok and math.isfinite(value(r, s.metric[d])):
                    by_seed[r.seed][d] = (value(r, s.metric[d]) - s.chance[d]) / (1 - s.chance[d])
        seeds = sorted((seed for seed, v in by_seed.items() if len(v) == len(usable)), key=seed_order)
        if seeds:
            agg.seeds[mixer] = seeds
            agg.scores[mixer] = np.array([[by_seed[seed][d] for d in usable] for seed in seeds])
    rng = np.random.RandomState(BOOTSTRAP_SEED)
    for mixer, scores in agg.scores.items():
        means = [float(rm.aggregate_iqm(scores)), float(rm.aggregate_mean(scores))]
        profile = rly.score_distributions(scores, TAUS)
        if len(scores) < 2:  # one run per data option: resampling it tells nothing
            agg.iqm[mixer], agg.mean[mixer] = Estimate(means[0]), Estimate(means[1])
            agg.profiles[mixer] = (profile, profile, profile)
            continue
        _, ci = rly.get_interval_estimates(
            {mixer: scores},
            lambda x: np.array([rm.aggregate_iqm(x), rm.aggregate_mean(x)]),
            reps=REPS,
            confidence_interval_size=LEVEL,
            random_state=rng,
        )
        agg.iqm[mixer] = Estimate(means[0], float(ci[mixer][0][0]), float(ci[mixer][1][0]))
        agg.mean[mixer] = Estimate(means[1], float(ci[mixer][0][1]), float(ci[mixer][1][1]))
        _, band = rly.get_interval_estimates(
            {mixer: scores},
            lambda x: rly.score_distributions(x, TAUS),
            reps=REPS,
            confidence_interval_size=LEVEL,
            random_state=rng,
        )
        agg.profiles[mixer] = (profile, band[mixer][0], band[mixer][1])
    if baseline in agg.scores:
        for mixer, scores in agg.scores.items():
            if mixer == baseline:
                continue
            pair = (scores, agg.scores[baseline])
            point = float(rm.probability_of_improvement(*pair))
            if min(len(scores), len(pair[1])) < 2:
                agg.improvement[mixer] = Estimate(point)
                continue
            _, ci = rly.get_interval_estimates(
                {mixer: pair},
                rm.probability_of_improvement,
                reps=REPS,
                confidence_interval_size=LEVEL,
                random_state=rng,
            )
            low, high = np.ravel(ci[mixer])
            agg.improvement[mixer] = Estimate(point, float(low), float(high))
    return agg


def csv_rows(s: Suite) -> list[dict[str, object]]:
    """One row per mixer and data option, and per mixer its aggregates over the data."""
    rows = []
    for m in s.mixers:
        for d in s.data:
            x = s.cells[m, d]
            rows.append(
                {
                    "mixer": m,
                    "data": d,
                    "metric": s.metric[d],
                    "n": x.n,
                    "mean": x.mean,
                    "ci_low": x.low,
                    "ci_high": x.high,
                    "chance": s.chance[d],
                    "at_chance": s.at_chance[m, d],
                }
            )
        agg = s.aggregates
        if agg is None or m not in agg.scores:
            continue
        named = {
            "IQM": agg.iqm.get(m),
            "mean": agg.mean.get(m),
            f"P(improvement over {agg.baseline})": agg.improvement.get(m),
        }
        for name, e in named.items():
            if e is not None:
                rows.append(
                    {
                        "mixer": m,
                        "data": ", ".join(agg.data),
                        "metric": f"{name} of normalised scores",
                        "n": len(agg.seeds[m]),
                        "mean": e.value,
                        "ci_low": e.low,
                        "ci_high": e.high,
                        "chance": "",
                        "at_chance": "",
                    }
                )
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
        x = as_number(r.settings.get(key, ""))
        if r.ok and x is not None and math.isfinite(value(r, metric)):
            points[r.config(leave_out=[key])][x].append(value(r, metric))
    return {
        name: [(x, spread(v, bounds(metric))) for x, v in sorted(by_x.items())] for name, by_x in sorted(points.items())
    }
