"""Comparisons of finished runs: one row per configuration (seeds grouped) with intervals, the difference
from a baseline with a test and a verdict, each configuration at its best tuned setting, and warnings.

Used at the end of every sweep and by ``attnexp-compare RUN_OR_SWEEP_FOLDER...``. Reads each run's
metrics.json and .hydra/overrides.yaml (and, for the curves, its TensorBoard events or the CSV logger's
metrics.csv); trains nothing. Files and plots: :mod:`attnexp.cli.summary_files`.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import yaml

from attnexp.cli import record
from attnexp.cli.stats import Difference, Spread, difference, spread, verdict

DEFAULT_SUMMARY = {"test/acc": "max", "val/acc_best": "max", "test/loss": "min"}  # records written before tasks named theirs
DEFAULT_TUNE = ("module.optimizer.lr",)
CHANCE_FACTOR = 1.5  # a run whose best validation accuracy is at most this many times chance learnt nothing
PARAMS_TOLERANCE = 0.10  # compared configurations whose parameter counts differ by more are flagged


@dataclass
class Run:
    """One run folder's record and the settings that name it."""

    folder: Path
    settings: dict[str, str]  # key -> value of the overrides that vary between the runs found (seed included)
    metrics: dict

    @property
    def seed(self) -> str:
        return self.settings.get("seed", str(self.metrics.get("seed")))

    @property
    def ok(self) -> bool:
        return self.metrics.get("status") == record.OK

    def config(self, leave_out: Sequence[str] = ()) -> str:
        """The configuration's name: its varying settings, the variant first, seed (and ``leave_out``) aside."""
        keys = sorted((k for k in self.settings if k not in ("seed", *leave_out)), key=lambda k: (k != "model", k))
        return ",".join(f"{k}={self.settings[k]}" for k in keys) or "all runs"


@dataclass
class Row:
    """One configuration: its runs, and per metric its values by seed, their spread and the difference from the baseline."""

    config: str
    runs: list[Run]
    values: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> seed -> value
    spreads: dict[str, Spread] = field(default_factory=dict)
    diffs: dict[str, Difference] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    tuned: str = ""  # the tuned values this row stands for, in the tuned table

    @property
    def ok(self) -> list[Run]:
        return [r for r in self.runs if r.ok]

    def mean_of(self, key: str) -> float:
        values = [r.metrics[key] for r in self.ok if isinstance(r.metrics.get(key), (int, float))]
        return sum(values) / len(values) if values else math.nan

    @property
    def params(self) -> int | None:
        return next((r.metrics["params"] for r in self.runs if "params" in r.metrics), None)

    @property
    def status(self) -> str:
        bad = [r for r in self.runs if not r.ok]
        if not bad:
            return "ok"
        return "; ".join(f"seed {r.seed} {r.metrics.get('status', '?')}" + (f": {first_line(r.metrics['error'])}" if r.metrics.get("error") else "") for r in bad)


@dataclass
class Comparison:
    """Everything a summary shows."""

    runs: list[Run]
    metrics: dict[str, str]  # metric -> "max" or "min"
    baseline: str
    rows: list[Row]
    tune: list[str]  # tuned keys the runs vary
    tuned: list[Row]  # each configuration at its best tuned setting (empty when nothing is tuned)
    tuned_rule: str
    tuned_baseline: str
    warnings: list[str]

    @property
    def data(self) -> str:
        return ", ".join(sorted({str(r.metrics.get("data")) for r in self.runs}))

    @property
    def epochs(self) -> str:
        found = sorted({r.metrics["epochs"] for r in self.runs if "epochs" in r.metrics})
        return "-".join(map(str, found[:: max(1, len(found) - 1)])) if found else "?"


def first_line(text: str) -> str:
    return text.splitlines()[0][:120] if text else ""


def find_runs(paths: Sequence[str | Path]) -> list[Run]:
    """Every run folder (holding metrics.json) under ``paths``, named by the overrides that differ between them."""
    found = []
    for root in paths:
        for folder in sorted(p.parent for p in Path(root).rglob(record.FILE)):
            overrides_file = folder / ".hydra" / "overrides.yaml"
            overrides = yaml.safe_load(overrides_file.read_text()) if overrides_file.exists() else []
            metrics = record.read(folder)
            settings = {"model": str(metrics.get("variant")), "data": str(metrics.get("data"))}
            settings.update(o.lstrip("+~").split("=", 1) for o in overrides or [] if "=" in o)
            found.append((folder, settings, metrics))
    keys = sorted({k for _, s, _ in found for k in s} - {"resume"})
    varying = [k for k in keys if len({s.get(k) for _, s, _ in found}) > 1 and k != "seed"] or ["model"]
    return [Run(folder, {k: s[k] for k in [*varying, "seed"] if k in s}, m) for folder, s, m in found]


def compare(runs: list[Run], baseline: str | None = None, tune: Sequence[str] = DEFAULT_TUNE) -> Comparison:
    """Group ``runs`` by configuration and compare every configuration with ``baseline`` (a config name or one of
    its settings such as ``model=dot``; default ``model=dot`` when present, else the first row)."""
    metrics = summary_metrics(runs)
    tuned_keys = [k for k in tune if any(k in r.settings for r in runs)]
    rows = group(runs, lambda r: r.config())
    base = pick_baseline(rows, baseline)
    fill(rows, base, metrics)
    tuned, rule, tuned_base = tuned_rows(runs, tuned_keys, metrics, baseline)
    return Comparison(runs, metrics, base.config if base else "", rows, tuned_keys, tuned, rule, tuned_base, warnings(rows, base))


def summary_metrics(runs: list[Run]) -> dict[str, str]:
    """The metrics the runs' tasks name (union, in order), those a run has values for."""
    named: dict[str, str] = {}
    for run in runs:
        pairs = run.metrics.get("summary") or DEFAULT_SUMMARY
        named.update({k: v for k, v in (pairs.items() if isinstance(pairs, dict) else pairs) if k not in named})
    return {k: v for k, v in named.items() if any(k in r.metrics for r in runs)} or dict(DEFAULT_SUMMARY)


def group(runs: list[Run], name) -> list[Row]:
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        groups[name(run)].append(run)
    return [Row(config, members) for config, members in sorted(groups.items())]


def pick_baseline(rows: list[Row], wanted: str | None) -> Row | None:
    if not rows:
        return None
    if wanted:
        matches = [r for r in rows if r.config == wanted or wanted in r.config.split(",")]
        if not matches:
            raise ValueError(f"no configuration matches the baseline {wanted!r}; the configurations are: {', '.join(r.config for r in rows)}")
        return matches[0]
    return next((r for r in rows if "model=dot" in r.config.split(",")), rows[0])


def fill(rows: list[Row], base: Row | None, metrics: dict[str, str]) -> None:
    """Per-seed values, spreads, and differences from ``base`` with verdicts, for every row and metric."""
    for row in rows:
        for metric in metrics:
            row.values[metric] = {r.seed: float(r.metrics[metric]) for r in row.ok if isinstance(r.metrics.get(metric), (int, float))}
            row.spreads[metric] = spread(list(row.values[metric].values()))
    for row in rows:
        if base is None or row is base:
            continue
        for metric, mode in metrics.items():
            row.diffs[metric] = difference(base.values[metric], row.values[metric])
            row.verdicts[metric] = verdict(row.diffs[metric], higher_is_better=mode == "max")


def tuned_rows(runs: list[Run], keys: list[str], metrics: dict[str, str], baseline: str | None) -> tuple[list[Row], str, str]:
    """Each configuration (tuned keys aside) at the tuned values whose runs have the best mean ``monitor_best`` (the
    task's checkpoint metric: best val/acc, or lowest val/loss for next tokens); rows named without the tuned keys."""
    if not keys:
        return [], "", ""
    chosen = []
    for outer in group(runs, lambda r: r.config(leave_out=keys)):
        candidates = group(outer.runs, lambda r: r.config())
        modes = {r.metrics.get("mode", "max") for r in outer.runs}
        sign = -1.0 if modes == {"min"} else 1.0
        scored = [(sign * c.mean_of("monitor_best"), c) for c in candidates if not math.isnan(c.mean_of("monitor_best"))]
        if not scored:
            continue
        best = max(scored, key=lambda pair: pair[0])[1]
        setting = best.runs[0].settings
        chosen.append(Row(outer.config, best.runs, tuned=", ".join(f"{k}={setting[k]}" for k in keys if k in setting)))
    monitors = sorted({f"{r.metrics.get('monitor', 'val/acc')} ({'lowest' if r.metrics.get('mode') == 'min' else 'highest'})" for r in runs})
    rule = (f"for each configuration, the value of {', '.join(keys)} whose runs have the best mean validation score "
            f"{' / '.join(monitors)} of the checkpoint each run tested; the test metrics are those runs'")
    wanted = [s for s in (baseline or "").split(",") if s and s.split("=")[0] not in keys]  # the baseline's other settings
    base = next((r for r in chosen if all(s in r.config.split(",") for s in wanted)), None) if wanted else pick_baseline(chosen, None)
    fill(chosen, base, metrics)
    return chosen, rule, base.config if base else ""


def warnings(rows: list[Row], base: Row | None) -> list[str]:
    """Parameter counts that differ from the baseline's by more than 10%; runs left at chance."""
    found = []
    if base is not None and base.params:
        for row in rows:
            if row.params and abs(row.params - base.params) > PARAMS_TOLERANCE * base.params:
                found.append(f"{row.config} has {row.params:,} parameters, {row.params / base.params:.2f}x the baseline's "
                             f"{base.params:,}: a difference may come from size, not from the mechanism.")
    for row in rows:
        for run in row.ok:
            acc, classes = run.metrics.get("val/acc_best", run.metrics.get("val/acc")), run.metrics.get("classes")
            if isinstance(acc, (int, float)) and classes and acc <= CHANCE_FACTOR / classes:
                found.append(f"{row.config} seed {run.seed} stayed at chance: best val/acc {acc:.4f} with {classes} classes "
                             f"(chance {1 / classes:.4f}); it learnt nothing (learning rate, epochs?).")
    return found


def number(value: float, digits: int = 4) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def metric_table(rows: list[Row], metric: str, mode: str, baseline: str, label: str = "config") -> str:
    """One metric: per-seed values, mean, std and interval of every row, and its difference from the baseline."""
    lines = [f"| {label} | n | per seed | mean | std | 95% CI | Δ vs {baseline} [95% CI] | p | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        s, values = row.spreads[metric], row.values[metric]
        std, ci = ("n=1, no spread", "-") if s.n == 1 else (number(s.std), f"[{number(s.low)}, {number(s.high)}]")
        diff = row.diffs.get(metric)
        if row.config == baseline:
            delta, p, word = "baseline", "", ""
        elif diff is None or math.isnan(diff.mean):
            delta, p, word = "-", "-", "-"
        else:
            delta = f"{diff.mean:+.4f}" + ("" if math.isnan(diff.low) else f" [{diff.low:+.4f}, {diff.high:+.4f}]")
            p, word = ("-" if math.isnan(diff.p) else f"{diff.p:.3g} ({diff.test})"), row.verdicts[metric]
        name = row.config + (f" ({row.tuned})" if row.tuned else "")
        seeds = ", ".join(f"{values[k]:.4f}" for k in sorted(values, key=seed_order)) or "-"
        lines.append("| " + " | ".join(c.replace("|", "/") for c in [name, str(s.n), seeds, number(s.mean), std, ci, delta, p, word]) + " |")
    return "\n".join(lines)


def seed_order(seed: str) -> tuple[int, str]:
    return (int(seed), "") if seed.lstrip("-").isdigit() else (0, seed)


def markdown(c: Comparison) -> str:
    """The summary as Markdown: a table per metric, the runs, the tuned table and the warnings."""
    seeds = sorted({r.seed for r in c.runs}, key=seed_order)
    parts = [f"Data {c.data}; epochs: {c.epochs}; {len(c.rows)} configurations; seeds {', '.join(seeds)}. "
             f"Baseline: {c.baseline}. Intervals: 95% Student t over seeds; differences paired by seed (paired t) "
             f"when both have the same seeds, else Welch's t (the sign test where every paired difference is the same); "
             f"a verdict needs p < 0.05."]
    for metric, mode in c.metrics.items():
        parts.append(f"### {metric} ({'higher' if mode == 'max' else 'lower'} is better)\n\n" + metric_table(c.rows, metric, mode, c.baseline))
    lines = ["| config | runs ok | params | s/epoch | samples/s | status |", "|---|---|---|---|---|---|"]
    for row in c.rows:
        lines.append(f"| {row.config} | {len(row.ok)}/{len(row.runs)} | {row.params or '-'} | {number(row.mean_of('seconds_per_epoch'), 2)} "
                     f"| {number(row.mean_of('train_samples_per_s'), 0)} | {row.status.replace('|', '/')} |")
    parts.append("### Runs\n\n" + "\n".join(lines))
    if c.tuned:
        tables = [f"#### {m}\n\n" + metric_table(c.tuned, m, mode, c.tuned_baseline) for m, mode in c.metrics.items()]
        parts.append(f"### Each configuration at its best {', '.join(c.tune)}\n\nRule: {c.tuned_rule}.\n\n" + "\n\n".join(tables))
    if c.warnings:
        parts.append("### Warnings\n\n" + "\n".join(f"- {w}" for w in c.warnings))
    return "\n\n".join(parts) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``attnexp-compare``: summarize run or sweep folders without retraining."""
    from attnexp.cli.summary_files import OUTPUTS, OverwriteError, write_all

    parser = argparse.ArgumentParser(prog="attnexp-compare", description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", help="run folders or sweep folders (searched recursively)")
    parser.add_argument("--out", help="where to write the summary (default: ./comparison/<date>_<time>)")
    parser.add_argument("--baseline", help="the configuration others are compared with, e.g. model=dot (default: model=dot when present, else the first)")
    parser.add_argument("--tune", nargs="*", default=list(DEFAULT_TUNE), help="keys tuned per configuration (default: module.optimizer.lr)")
    args = parser.parse_args(argv)
    missing = [f for f in args.folders if not Path(f).is_dir()]
    if missing:
        print(f"attnexp-compare: no such folder: {', '.join(missing)}. Give run or sweep folders (under outputs/).", file=sys.stderr)
        return 2
    runs = find_runs(args.folders)
    if not runs:
        print(f"No runs (folders with metrics.json) under: {', '.join(args.folders)}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path("comparison") / time.strftime("%Y-%m-%d_%H-%M-%S")
    try:
        result = compare(runs, args.baseline, args.tune)
        write_all(result, out)
    except (ValueError, OverwriteError) as err:
        print(f"attnexp-compare: {err}", file=sys.stderr)
        return 2
    print(markdown(result) + f"\nWrote {', '.join(OUTPUTS)} and plots into {out}")
    return 1 if any(r.status != "ok" for r in result.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
