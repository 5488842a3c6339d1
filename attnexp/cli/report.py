"""A comparison as text: the Markdown summary (what is printed) and the LaTeX table."""

from __future__ import annotations

import math

from attnexp.cli import suite
from attnexp.cli.compare import Comparison, Row, seed_order


def number(value: float, digits: int = 4) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def metric_table(rows: list[Row], metric: str, mode: str, baseline: str, label: str = "config") -> str:
    """One metric: per-seed values, mean, std and interval of every row, and its difference from the baseline."""
    lines = [f"| {label} | n | per seed | mean | std | 95% CI | Δ vs {baseline} [95% CI] | p | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        s, values = row.spreads[metric], row.values[metric]
        std, ci = ("n=1, no spread", "-") if s.n == 1 else (number(s.std), f"[{number(s.low)}, {number(s.high)}]")
        diff = row.diffs.get(metric)
        if row.config == (row.baseline or baseline):
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


def markdown(c: Comparison) -> str:
    """The summary as Markdown: a table per metric, the runs, the tuned table and the warnings."""
    seeds = sorted({r.seed for r in c.runs}, key=seed_order)
    parts = [f"Data {c.data}; epochs: {c.epochs}; {len(c.rows)} configurations; seeds {', '.join(seeds)}. "
             f"Baseline: {c.baseline}. Intervals: 95% Student t over seeds; differences paired by seed (paired t) "
             f"when both have the same seeds, else Welch's t (the sign test where every paired difference is the same); "
             f"a verdict needs p < 0.05."]
    for metric, mode in c.metrics.items():
        better = f"{'higher' if mode == 'max' else 'lower'} is better" if mode else "no better direction"
        parts.append(f"### {metric} ({better})\n\n" + metric_table(c.rows, metric, mode, c.baseline))
    tasks = suite.suite(c)
    if tasks:
        parts.append(suite.markdown(tasks))
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


def tex(text: str) -> str:
    return "".join("\\" + ch if ch in "&%$#_{}" else ch for ch in text)


def latex(c: Comparison) -> str:
    """A booktabs table: mean ± 95% interval half-width of every metric per configuration."""
    arrows = {"max": " $\\uparrow$", "min": " $\\downarrow$"}
    head = " & ".join(["Configuration", "$n$", *(tex(m) + arrows.get(mode, "") for m, mode in c.metrics.items())])
    lines = ["\\begin{tabular}{l" + "r" * (1 + len(c.metrics)) + "}", "\\toprule", head + " \\\\", "\\midrule"]
    for row in c.rows:
        cells = [tex(row.config), str(len(row.ok))]
        for m in c.metrics:
            s = row.spreads[m]
            cells.append("--" if math.isnan(s.mean) else f"${s.mean:.4f}$" if s.n < 2 else f"${s.mean:.4f} \\pm {(s.high - s.low) / 2:.4f}$")
        lines.append(" & ".join(cells) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    caption = (f"% Mean over seeds $\\pm$ half-width of the 95\\% Student-t interval. Data {tex(c.data)}, epochs: {c.epochs}. "
               f"Written by attnexp.")
    tasks = suite.suite(c)
    return caption + "\n" + "\n".join(lines) + "\n" + ("\n" + suite.latex(tasks) if tasks else "")
