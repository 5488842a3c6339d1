"""Summaries of finished runs: a table per configuration (seeds grouped) and comparison plots.

Used at the end of every sweep and by ``attnexp-compare RUN_OR_SWEEP_FOLDER...``.
Reads each run's metrics.json, .hydra/overrides.yaml and TensorBoard events (or the CSV logger's
metrics.csv); trains nothing.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import yaml

from attnexp.cli import record

COLUMNS = ["config", "n", "val/acc_best", "test/acc", "params", "s/epoch", "samples/s", "status"]


@dataclass
class Run:
    """One run folder's record."""

    folder: Path
    config: str
    seed: str
    metrics: dict
    curve: list[tuple[int, float]] = field(default_factory=list)  # (epoch, val/acc)


def find_runs(paths: Sequence[str | Path]) -> list[Run]:
    """Every run folder (holding metrics.json) under ``paths``.

    A run's configuration is named by the overrides that differ between the
    runs found, seed aside (e.g. ``model=euclid``); seeds of one configuration
    are grouped.
    """
    found = []
    for root in paths:
        for folder in sorted(p.parent for p in Path(root).rglob(record.FILE)):
            overrides_file = folder / ".hydra" / "overrides.yaml"
            overrides = yaml.safe_load(overrides_file.read_text()) if overrides_file.exists() else []
            metrics = record.read(folder)
            settings = {"model": str(metrics.get("variant")), "data": str(metrics.get("data"))}
            settings.update(o.lstrip("+~").split("=", 1) for o in overrides or [] if "=" in o)
            found.append((folder, settings, metrics))
    keys = sorted({k for _, s, _ in found for k in s} - {"seed", "resume"})
    varying = [k for k in keys if len({s.get(k) for _, s, _ in found}) > 1] or ["model"]
    return [
        Run(folder, ",".join(f"{k}={s[k]}" for k in varying if k in s), s.get("seed", str(m.get("seed"))), m, val_curve(folder))
        for folder, s, m in found
    ]


def val_curve(folder: Path) -> list[tuple[int, float]]:
    """``val/acc`` per epoch from the run's TensorBoard events, else from ``metrics.csv`` (``logger=csv``);
    the last value logged for each epoch."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if not any(folder.glob("events.out.tfevents.*")) and (folder / "metrics.csv").is_file():
        with (folder / "metrics.csv").open(newline="") as f:
            return sorted({int(r["epoch"]): float(r["val/acc"]) for r in csv.DictReader(f) if r.get("val/acc")}.items())
    by_step: dict[int, float] = {}
    epochs: dict[int, int] = {}
    for events in sorted(folder.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        tags = acc.Tags()["scalars"]
        if "val/acc" in tags:
            by_step.update({e.step: e.value for e in acc.Scalars("val/acc")})
        if "epoch" in tags:
            epochs.update({e.step: int(e.value) for e in acc.Scalars("epoch")})
    curve = {epochs.get(step, i): value for i, (step, value) in enumerate(sorted(by_step.items()))}
    return sorted(curve.items())


def mean_std(values: list[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarize(runs: list[Run]) -> list[dict]:
    """One row per configuration: seeds grouped, mean and std over the runs that finished."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        groups[run.config].append(run)
    rows = []
    for config, members in sorted(groups.items()):
        ok = [r for r in members if r.metrics.get("status") == record.OK]
        row = {"config": config, "n": len(ok), "runs": len(members)}
        for key in ("val/acc_best", "test/acc", "seconds_per_epoch", "train_samples_per_s"):
            row[key], row[f"{key}_std"] = mean_std([r.metrics[key] for r in ok if key in r.metrics])
        row["params"] = next((r.metrics["params"] for r in members if "params" in r.metrics), None)
        bad = [r for r in members if r.metrics.get("status") != record.OK]
        row["status"] = "ok" if not bad else "; ".join(
            f"seed {r.seed} {r.metrics.get('status', '?')}: {(r.metrics.get('error') or '').splitlines()[0][:120] if r.metrics.get('error') else ''}".rstrip(": ")
            for r in bad
        )
        rows.append(row)
    return rows


def _pm(row: dict, key: str, digits: int = 4) -> str:
    mean, std = row[key], row[f"{key}_std"]
    return "-" if math.isnan(mean) else f"{mean:.{digits}f} ± {std:.{digits}f}"


def table(rows: list[dict]) -> str:
    """The summary as a Markdown table."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [r["config"], f"{r['n']}/{r['runs']}", _pm(r, "val/acc_best"), _pm(r, "test/acc"), str(r["params"] or "-"),
                 "-" if math.isnan(r["seconds_per_epoch"]) else f"{r['seconds_per_epoch']:.2f}",
                 "-" if math.isnan(r["train_samples_per_s"]) else f"{r['train_samples_per_s']:.0f}", r["status"]]
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def write_summary(runs: list[Run], out_dir: Path) -> list[dict]:
    """Write summary.csv, summary.md, val_acc_curves.png and test_acc.png into ``out_dir``; return the rows."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = summarize(runs)
    keys = ["config", "n", "runs", "val/acc_best", "val/acc_best_std", "test/acc", "test/acc_std", "params",
            "seconds_per_epoch", "seconds_per_epoch_std", "train_samples_per_s", "train_samples_per_s_std", "status"]
    with (out_dir / "summary.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows({k: row[k] for k in keys} for row in rows)
    (out_dir / "summary.md").write_text(table(rows))
    plot(runs, rows, out_dir)
    return rows


def plot(runs: list[Run], rows: list[dict], out_dir: Path) -> None:
    """Validation accuracy per epoch (mean line, min-max band over seeds) and test accuracy bars (± std)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row in rows:
        curves = [dict(r.curve) for r in runs if r.config == row["config"] and r.curve]
        epochs = sorted(set().union(*curves)) if curves else []
        if not epochs:
            continue
        values = [[c[e] for c in curves if e in c] for e in epochs]
        x = [e + 1 for e in epochs]
        ax.plot(x, [statistics.fmean(v) for v in values], marker="o", label=row["config"])
        ax.fill_between(x, [min(v) for v in values], [max(v) for v in values], alpha=0.2)
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set(xlabel="epoch", ylabel="val/acc", title="Validation accuracy (mean, min-max over seeds)")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "val_acc_curves.png", dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(rows)), 4.5))
    names = [r["config"] for r in rows]
    means = [0 if math.isnan(r["test/acc"]) else r["test/acc"] for r in rows]
    ax.bar(range(len(rows)), means, yerr=[0 if math.isnan(r["test/acc_std"]) else r["test/acc_std"] for r in rows], capsize=4)
    ax.set_xticks(range(len(rows)), names, rotation=30, ha="right", fontsize=8)
    finite = [m for m in means if m > 0]
    ax.set_ylim(max(0.0, min(finite) - 0.05) if finite else 0.0, 1.0)
    ax.set(ylabel="test/acc", title="Test accuracy (mean ± std over seeds)")
    fig.tight_layout()
    fig.savefig(out_dir / "test_acc.png", dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """``attnexp-compare``: summarize run or sweep folders without retraining."""
    parser = argparse.ArgumentParser(prog="attnexp-compare", description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", help="run folders or sweep folders (searched recursively)")
    parser.add_argument("--out", help="where to write the summary (default: the single folder given, else ./comparison)")
    args = parser.parse_args(argv)
    missing = [f for f in args.folders if not Path(f).is_dir()]
    if missing:
        print(f"attnexp-compare: no such folder: {', '.join(missing)}. Give run or sweep folders (under outputs/).", file=sys.stderr)
        return 2
    runs = find_runs(args.folders)
    if not runs:
        print(f"No runs (folders with metrics.json) under: {', '.join(args.folders)}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(args.folders[0]) if len(args.folders) == 1 else Path("comparison")
    rows = write_summary(runs, out)
    print(table(rows) + f"\nWrote {out}/summary.csv, summary.md, val_acc_curves.png, test_acc.png")
    return 1 if any(r["status"] != "ok" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
