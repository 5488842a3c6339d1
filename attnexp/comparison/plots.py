"""The comparison's plots: each test metric per configuration (mean, interval, seeds) and the validation curves,
and the primary metric against each numeric setting a sweep varies."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

from attnexp.comparison import suite
from attnexp.comparison.tables import Comparison


def knob_file(c: Comparison, key: str) -> str:
    return f"{suite.primary_metric(c.runs).replace('/', '_')}_vs_{key.replace('/', '_')}.png"



def plot(c: Comparison, out: Path) -> None:
    """Per test metric: bars of the mean from zero (log axis for perplexity), per-seed dots and interval whiskers;
    and the validation curve of the task's checkpoint metric per epoch (mean line, min-max band over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    n = max((len(r.ok) for r in c.rows), default=0)
    about = f"data {c.data}, epochs: {c.epochs}, n={n} seeds"
    for metric, mode in c.metrics.items():
        if not metric.startswith("test/"):
            continue
        fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(c.rows)), 4.5))
        for i, row in enumerate(c.rows):
            s, values = row.spreads[metric], list(row.values[metric].values())
            if math.isnan(s.mean):
                continue
            ax.bar(i, s.mean, color="tab:blue", alpha=0.6)
            if s.n > 1:
                ax.errorbar(i, s.mean, yerr=[[s.mean - s.low], [s.high - s.mean]], color="black", capsize=5)
            ax.scatter([i + (k - (len(values) - 1) / 2) * 0.08 for k in range(len(values))], values, color="black", s=12, zorder=3)
        ax.set_xticks(range(len(c.rows)), [r.config for r in c.rows], rotation=30, ha="right", fontsize=8)
        if metric.endswith("ppl"):
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        better = {"max": " (higher is better)", "min": " (lower is better)"}.get(mode, "")
        ax.set(ylabel=metric)
        ax.set_title(f"{metric}{better}\nmean, 95% CI, seeds as dots; {about}", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / f"{metric.replace('/', '_')}.png", dpi=120)
        plt.close(fig)

    monitor = next((r.metrics["monitor"] for r in c.runs if r.metrics.get("monitor")), "val/acc")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row in c.rows:
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
    fig.savefig(out / "val_curves.png", dpi=120)
    plt.close(fig)


def plot_knob(c: Comparison, key: str, out: Path) -> None:
    """The task's primary metric against ``key``: one line per configuration, mean and 95% interval over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = suite.primary_metric(c.runs)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, points in suite.knob_curves(c.runs, key, metric).items():
        x, s = [p[0] for p in points], [p[1] for p in points]
        line = ax.plot(x, [v.mean for v in s], marker="o", label=name)[0]
        low = [v.low if v.n > 1 else v.mean for v in s]
        high = [v.high if v.n > 1 else v.mean for v in s]
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.15)
    n = max((len(r.ok) for r in c.rows), default=0)
    ax.set(xlabel=key, ylabel=metric, title=f"{metric} against {key}: mean and 95% CI over seeds (n<={n})\ndata {c.data}, epochs: {c.epochs}")
    ax.set_xticks(sorted({suite.as_number(r.settings[key]) for r in c.runs if key in r.settings}))
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / knob_file(c, key), dpi=120)
    plt.close(fig)


def val_curve(folder: Path, tag: str) -> list[tuple[int, float]]:
    """``tag`` per epoch (from 1) from the run's TensorBoard events (logged with the epoch as step), else from
    the CSV logger's ``metrics.csv``; the last value logged for each epoch."""
    if not any(folder.glob("events.out.tfevents.*")) and (folder / "metrics.csv").is_file():
        with (folder / "metrics.csv").open(newline="") as f:
            return sorted({int(r.get("step") or r["epoch"]): float(r[tag]) for r in csv.DictReader(f) if r.get(tag)}.items())
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    curve: dict[int, float] = {}
    for events in sorted(folder.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            curve.update({e.step: e.value for e in acc.Scalars(tag)})
    return sorted(curve.items())

