"""Sweeps over tasks and difficulties: a tasks x variants table with a mean score per variant, and curves of a
task's metric against a numeric setting the sweep varies (``data.num_pairs``, say)."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field

from attnexp.cli.chance import at_chance
from attnexp.cli.compare import Comparison, seed_order
from attnexp.cli.run_folders import Run
from attnexp.cli.stats import Spread, spread

NOT_KNOBS = ("seed", "model", "data")


@dataclass
class Suite:
    """Each task's primary metric (the first its task names) per variant, and each variant's mean over tasks."""

    tasks: list[str]  # data choices
    variants: list[str]  # configurations without the data choice
    metric: dict[str, str]  # task -> its primary metric
    cells: dict[tuple[str, str], Spread] = field(default_factory=dict)  # (variant, task) -> over seeds
    at_chance: dict[tuple[str, str], int] = field(default_factory=dict)  # (variant, task) -> runs left at chance
    scores: dict[str, Spread] = field(default_factory=dict)  # variant -> per seed, the mean over tasks


def primary_metric(runs: list[Run]) -> str:
    """The first metric the runs' task names in its summary (``test/acc``)."""
    return next((name for r in runs for name, _ in r.metrics.get("summary") or []), "test/acc")


def suite(c: Comparison) -> Suite | None:
    """The tasks x variants view of ``c``, or None when its runs do not vary the data."""
    tasks = sorted({r.settings["data"] for r in c.runs if "data" in r.settings})
    if len(tasks) < 2:
        return None
    runs_of: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in c.runs:
        runs_of[run.config(leave_out=["data"]), run.settings["data"]].append(run)
    variants = sorted({v for v, _ in runs_of})
    metric = {t: primary_metric([r for (_, task), rs in runs_of.items() if task == t for r in rs]) for t in tasks}
    s = Suite(tasks, variants, metric)
    for variant in variants:
        by_seed: dict[str, list[float]] = defaultdict(list)
        for task in tasks:
            ok = [r for r in runs_of.get((variant, task), []) if r.ok and isinstance(r.metrics.get(metric[task]), (int, float))]
            s.cells[variant, task] = spread([float(r.metrics[metric[task]]) for r in ok])
            s.at_chance[variant, task] = sum(at_chance(r) for r in ok)
            for r in ok:
                by_seed[r.seed].append(float(r.metrics[metric[task]]))
        complete = [statistics.fmean(v) for seed, v in sorted(by_seed.items(), key=lambda i: seed_order(i[0])) if len(v) == len(tasks)]
        s.scores[variant] = spread(complete)
    return s


def cell(s: Spread, digits: int = 4) -> str:
    if math.isnan(s.mean):
        return "-"
    return f"{s.mean:.{digits}f}" + ("" if s.n < 2 else f" [{s.low:.{digits}f}, {s.high:.{digits}f}]")


def markdown(s: Suite) -> str:
    head = [f"{t} ({s.metric[t]})" for t in s.tasks]
    lines = ["| variant | " + " | ".join([*head, "mean score"]) + " |", "|---" * (len(head) + 2) + "|"]
    for v in s.variants:
        cells = [cell(s.cells[v, t]) + (f" ({s.at_chance[v, t]} at chance)" if s.at_chance[v, t] else "") for t in s.tasks]
        lines.append(f"| {v} | " + " | ".join([*cells, cell(s.scores[v])]) + " |")
    return (f"### Tasks x variants\n\nEach task's primary metric: mean [95% CI] over seeds. Mean score: per seed, the mean "
            f"over the {len(s.tasks)} tasks (seeds that ran every task), then its mean [95% CI] over seeds. "
            "A run whose best val/acc is at most 1.5 times chance is counted as at chance.\n\n" + "\n".join(lines))


def latex(s: Suite) -> str:
    from attnexp.cli.report import tex

    def entry(x: Spread) -> str:
        return "--" if math.isnan(x.mean) else f"${x.mean:.3f}$" if x.n < 2 else f"${x.mean:.3f} \\pm {(x.high - x.low) / 2:.3f}$"

    lines = ["\\begin{tabular}{l" + "r" * (len(s.tasks) + 1) + "}", "\\toprule",
             " & ".join(["Variant", *(tex(t) for t in s.tasks), "Mean"]) + " \\\\", "\\midrule"]
    lines += [" & ".join([tex(v), *(entry(s.cells[v, t]) for t in s.tasks), entry(s.scores[v])]) + " \\\\" for v in s.variants]
    return "% Each task's primary metric, mean over seeds $\\pm$ half-width of the 95\\% interval.\n" + "\n".join(
        [*lines, "\\bottomrule", "\\end{tabular}"]) + "\n"


def csv_rows(s: Suite) -> list[dict[str, object]]:
    rows = []
    for v in s.variants:
        for t in [*s.tasks, "mean score"]:
            x = s.scores[v] if t == "mean score" else s.cells[v, t]
            rows.append({"variant": v, "task": t, "metric": s.metric.get(t, "mean"), "n": x.n, "mean": x.mean,
                         "ci_low": x.low, "ci_high": x.high, "at_chance": s.at_chance.get((v, t), "")})
    return rows


def knobs(runs: list[Run], tuned: list[str]) -> list[str]:
    """Settings the runs vary, numeric in every run that has them, other than the seed, variant, data and tuned keys."""
    found = []
    for key in sorted({k for r in runs for k in r.settings} - set(NOT_KNOBS) - set(tuned)):
        values = {r.settings[key] for r in runs if key in r.settings}
        if len(values) > 1 and all(number(v) is not None for v in values):
            found.append(key)
    return found


def number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def knob_curves(runs: list[Run], key: str, metric: str) -> dict[str, list[tuple[float, Spread]]]:
    """Per configuration (``key`` left out): ``metric`` over seeds at each value of ``key``, by value."""
    points: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in runs:
        if r.ok and key in r.settings and isinstance(r.metrics.get(metric), (int, float)):
            points[r.config(leave_out=[key])][number(r.settings[key])].append(float(r.metrics[metric]))
    return {name: [(x, spread(v)) for x, v in sorted(by_x.items())] for name, by_x in sorted(points.items())}
