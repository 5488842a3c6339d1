"""The files of a comparison: summary.md, summary.csv, runs.csv, summary.tex and plots, written only over files
that a comparison wrote (they are listed in the folder's ``.attnexp-summary``)."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

from attnexp.cli import record, suite
from attnexp.cli.compare import Comparison, seed_order
from attnexp.cli.run_folders import Run
from attnexp.cli.report import latex, markdown

OUTPUTS = ("summary.md", "summary.csv", "runs.csv", "summary.tex")
MANIFEST = ".attnexp-summary"


class OverwriteError(Exception):
    """The output folder holds a file of the same name that no comparison wrote."""


def write_all(c: Comparison, out: Path) -> list[Path]:
    """Write every file of ``c`` into ``out``; return their paths. Refuses to replace a file not written by a comparison."""
    names = [*OUTPUTS, *plot_names(c)]
    out.mkdir(parents=True, exist_ok=True)
    ours = set((out / MANIFEST).read_text().split()) if (out / MANIFEST).is_file() else set()
    foreign = [n for n in names if (out / n).exists() and n not in ours]
    if foreign:
        raise OverwriteError(f"{out} already holds {', '.join(foreign)}, which no comparison wrote; nothing was written. "
                             "Choose another folder with --out.")
    (out / MANIFEST).write_text("\n".join(sorted(ours | set(names))) + "\n")
    (out / "summary.md").write_text(markdown(c))
    write_summary_csv(c, out / "summary.csv")
    write_runs_csv(c.runs, out / "runs.csv")
    (out / "summary.tex").write_text(latex(c))
    tasks = suite.suite(c)
    if tasks:
        write_csv(suite.csv_rows(tasks), out / "tasks.csv")
    plot(c, out)
    for key in suite.knobs(c.runs, c.tune):
        plot_knob(c, key, out)
    return [out / n for n in names]


def plot_names(c: Comparison) -> list[str]:
    names = [f"{m.replace('/', '_')}.png" for m in c.metrics if m.startswith("test/")] + ["val_curves.png"]
    names += [knob_file(c, key) for key in suite.knobs(c.runs, c.tune)]
    return names + (["tasks.csv"] if suite.suite(c) else [])


def knob_file(c: Comparison, key: str) -> str:
    return f"{suite.primary_metric(c.runs).replace('/', '_')}_vs_{key.replace('/', '_')}.png"


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)


def write_summary_csv(c: Comparison, path: Path) -> None:
    """One row per configuration (and per tuned configuration, marked in ``table``)."""
    fields = ["table", "config", "tuned", "n", "runs"]
    for m in c.metrics:
        fields += [f"{m} {k}" for k in ("mean", "std", "ci_low", "ci_high", "diff", "diff_low", "diff_high", "p", "test", "verdict")]
    fields += ["params", "seconds_per_epoch", "status"]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for table, rows in (("all", c.rows), ("tuned", c.tuned)):
            for row in rows:
                out = {"table": table, "config": row.config, "tuned": row.tuned, "n": len(row.ok), "runs": len(row.runs),
                       "params": row.params, "seconds_per_epoch": row.mean_of("seconds_per_epoch"), "status": row.status}
                for m in c.metrics:
                    s, d = row.spreads[m], row.diffs.get(m)
                    out.update({f"{m} mean": s.mean, f"{m} std": s.std, f"{m} ci_low": s.low, f"{m} ci_high": s.high})
                    if d is not None:
                        out.update({f"{m} diff": d.mean, f"{m} diff_low": d.low, f"{m} diff_high": d.high, f"{m} p": d.p,
                                    f"{m} test": d.test, f"{m} verdict": row.verdicts[m]})
                writer.writerow(out)


def write_runs_csv(runs: list[Run], path: Path) -> None:
    """One row per run: its configuration, seed, folder, status and every final metric of its metrics.json."""
    metrics = sorted({k for r in runs for k in record.final_metrics({k: v for k, v in r.metrics.items() if isinstance(v, (int, float))})})
    fields = ["config", "seed", "folder", "status", "variant", "data", "params", "epochs", "seconds_per_epoch", *metrics]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for run in sorted(runs, key=lambda r: (r.config(), seed_order(r.seed))):
            writer.writerow({**run.metrics, "config": run.config(), "seed": run.seed, "folder": str(run.folder.resolve())})


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
        x = [e + 1 for e in epochs]
        ax.plot(x, [statistics.fmean(v) for v in values], marker="o", label=row.config)
        ax.fill_between(x, [min(v) for v in values], [max(v) for v in values], alpha=0.2)
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
    ax.set_xticks(sorted({suite.number(r.settings[key]) for r in c.runs if key in r.settings}))
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / knob_file(c, key), dpi=120)
    plt.close(fig)


def val_curve(folder: Path, tag: str) -> list[tuple[int, float]]:
    """``tag`` per epoch (0-based) from the run's TensorBoard events (logged with the epoch as step), else from
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

