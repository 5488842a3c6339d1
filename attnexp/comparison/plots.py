"""The comparison's plots: each test metric per configuration (mean, interval, seeds) and the validation curves,
and the primary metric against each numeric setting a sweep varies."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path
from typing import Any

from attnexp.comparison import suite
from attnexp.comparison.search import Search, rounded
from attnexp.comparison.suite import seed_order
from attnexp.comparison.summary import Comparison, Table
from attnexp.comparison.tables import Row
from attnexp.runs.resolution import is_fraction

PROFILE = "performance_profile.png"


def groups(rows: list[Row]) -> list[list[tuple[int, Row]]]:
    """The rows that share a baseline (the seeds a verdict pairs), each with its position in the plot: the rows of
    one group side by side."""
    found: dict[str, list[Row]] = {}
    for row in rows:
        found.setdefault(row.baseline, []).append(row)
    position = {id(row): i for i, row in enumerate(row for group in found.values() for row in group)}
    return [[(position[id(row)], row) for row in group] for group in found.values()]


def search_file(key: str) -> str:
    return f"search_{key.replace('/', '_')}.png"


def knob_file(t: Table, key: str) -> str:
    return f"{t.prefix}{t.primary.replace('/', '_')}_vs_{key.replace('/', '_')}.png"


def metric_file(t: Table, metric: str) -> str:
    return f"{t.prefix}{metric.replace('/', '_')}.png"


def plot(t: Table, out: Path) -> None:
    """A table's plots. Per test metric: bars of the mean from zero (log axis for perplexity), per-seed dots and
    interval whiskers; and the validation curve of the task's checkpoint metric per epoch (mean line, min-max band
    over seeds)."""
    import matplotlib.ticker
    from matplotlib.figure import Figure

    n = max((len(r.ok) for r in t.rows), default=0)
    about = f"data {t.data}, epochs: {t.epochs}, n={n} seeds"
    seeds = sorted({seed for row in t.rows for values in row.values.values() for seed in values}, key=seed_order)
    offset = {seed: (k - (len(seeds) - 1) / 2) * min(0.08, 0.6 / max(1, len(seeds))) for k, seed in enumerate(seeds)}
    for metric, mode in t.metrics.items():
        if not metric.startswith("test/"):
            continue
        fig = Figure(figsize=(max(5.0, 1.3 * len(t.rows)), 4.5))
        ax = fig.subplots()
        placed = [pair for group in groups(t.rows) for pair in group]
        for i, row in placed:
            s = row.spreads[metric]
            if math.isnan(s.mean):
                continue
            ax.bar(i, s.mean, color="tab:blue", alpha=0.5)
            if s.n > 1:
                ax.errorbar(i, s.mean, yerr=[[s.mean - s.low], [s.high - s.mean]], color="black", capsize=5)
        for group in groups(t.rows):  # one line per seed through the rows compared with one baseline: the pairing
            for seed in seeds:
                points = [
                    (i + offset[seed], row.values[metric][seed]) for i, row in group if seed in row.values[metric]
                ]
                if points:
                    ax.plot(
                        *zip(*points), color="black", alpha=0.35, linewidth=0.8, marker="o", markersize=3.5, zorder=3
                    )
        ax.set_xticks(range(len(placed)), [r.config for _, r in placed], rotation=30, ha="right", fontsize=8)
        if metric.endswith("ppl"):
            ax.set_yscale("log")
        else:
            ax.set_ylim(0, 1.02 if is_fraction(metric) else None)
        better = {"max": " (higher is better)", "min": " (lower is better)"}.get(mode, "")
        ax.set(ylabel=metric)
        ax.set_title(f"{metric}{better}\nmean, 95% CI, each seed's values linked; {about}", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / metric_file(t, metric), dpi=120)

    monitor = next((r.metrics["monitor"] for r in t.runs if r.metrics.get("monitor")), "val/acc")
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for row in t.rows:
        curves = [dict(val_curve(r.folder, monitor)) for r in row.ok]
        curves = [cv for cv in curves if cv]
        epochs = sorted(set().union(*curves)) if curves else []
        if not epochs:
            continue
        values = [[cv[e] for cv in curves if e in cv] for e in epochs]
        ax.plot(epochs, [statistics.fmean(v) for v in values], marker="o", label=row.config)
        ax.fill_between(epochs, [min(v) for v in values], [max(v) for v in values], alpha=0.2)
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set(xlabel="epoch", ylabel=monitor, title=f"{monitor} per epoch (mean, min-max over seeds)\n{about}")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"{t.prefix}val_curves.png", dpi=120)


def plot_knob(t: Table, key: str, out: Path) -> None:
    """A table's primary metric against ``key``: one line per configuration, mean and 95% interval over seeds."""
    from matplotlib.figure import Figure

    metric = t.primary
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    for name, points in suite.knob_curves(t.runs, key, metric).items():
        x, s = [p[0] for p in points], [p[1] for p in points]
        line = ax.plot(x, [v.mean for v in s], marker="o", label=name)[0]
        low = [v.low if v.n > 1 else v.mean for v in s]
        high = [v.high if v.n > 1 else v.mean for v in s]
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.15)
    n = max((len(r.ok) for r in t.rows), default=0)
    ax.set(
        xlabel=key,
        ylabel=metric,
        title=f"{metric} against {key}: mean and 95% CI over seeds (n<={n})\ndata {t.data}, epochs: {t.epochs}",
    )
    ax.set_xticks(sorted({suite.as_number(r.settings[key]) for r in t.runs if key in r.settings}))
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / knob_file(t, key), dpi=120)


def val_curve(folder: Path, tag: str) -> list[tuple[int, float]]:
    """``tag`` per epoch (from 1) from the run's TensorBoard events (logged with the epoch as step), else from
    the CSV logger's ``metrics.csv``; the last value logged for each epoch."""
    if not any(folder.glob("events.out.tfevents.*")) and (folder / "metrics.csv").is_file():
        with (folder / "metrics.csv").open(newline="") as f:
            return sorted(
                {int(r.get("step") or r["epoch"]): float(r[tag]) for r in csv.DictReader(f) if r.get(tag)}.items()
            )
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    curve: dict[int, float] = {}
    for events in sorted(folder.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            curve.update({e.step: e.value for e in acc.Scalars(tag)})
    return sorted(curve.items())


def plot_profile(c: Comparison, out: Path) -> None:
    """The performance profile of every mixer: the share of its runs (over data options and seeds) whose normalised
    score exceeds tau, with its stratified bootstrap 95% band (rliable)."""
    from matplotlib.figure import Figure
    from rliable import plot_utils

    agg = c.suite.aggregates if c.suite else None
    if agg is None:
        return
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    curves = {m: p[0] for m, p in agg.profiles.items()}
    bands = {m: (p[1], p[2]) for m, p in agg.profiles.items()}
    plot_utils.plot_performance_profiles(
        curves,
        suite.TAUS,
        performance_profile_cis=bands,
        ax=ax,
        xlabel=r"normalised score $\tau$",
        ylabel=r"share of runs with score $> \tau$",
        labelsize="medium",
        ticklabelsize="small",
    )
    seeds = max((len(v) for v in agg.seeds.values()), default=0)
    ax.set_title(
        f"Performance profile over {', '.join(agg.data)}\n(chance 0, best 1; 95% bootstrap bands; up to {seeds} seeds)",
        fontsize=9,
    )
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(out / PROFILE, dpi=120)


def plot_search(s: Search, key: str, out: Path) -> None:
    """A search's objective against one searched key, a point per trial, the best marked (log axis for a key whose
    values span more than a factor of 20, as learning rates do)."""
    from matplotlib.figure import Figure

    trials = [t for t in s.trials if key in t.values and math.isfinite(t.objective)]
    numbers = [suite.as_number(t.values[key]) for t in trials]
    labels = sorted({t.values[key] for t in trials})
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    xs = [n for n in numbers if n is not None]
    numeric = bool(trials) and len(xs) == len(trials)
    if numeric and min(xs) > 0 and max(xs) > 20 * min(xs):
        ax.set_xscale("log")
    if not numeric:  # categories: one position per value
        xs = [float(labels.index(t.values[key])) for t in trials]
        ax.set_xticks(range(len(labels)), labels)
    ax.scatter(xs, [t.objective for t in trials], color="tab:blue", s=20, label="trial")
    best = s.best
    if best is not None and key in best.values:
        x: Any = suite.as_number(best.values[key]) if numeric else labels.index(best.values[key])
        ax.scatter(
            [x],
            [best.objective],
            color="tab:red",
            s=60,
            marker="*",
            zorder=3,
            label=f"best: {key}={rounded(best.values[key])}",
        )
    ax.set(xlabel=key, ylabel=s.objective, title=f"{s.objective} of each trial against {key} ({len(s.trials)} trials)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / search_file(key), dpi=120)
