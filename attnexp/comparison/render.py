"""A comparison as text: the Markdown summary (what is printed) and the LaTeX tables, every number through one
formatter (:func:`fmt`, :data:`DIGITS` decimals) so the two never disagree."""

from __future__ import annotations

import math

from attnexp.comparison.stats import Spread
from attnexp.comparison.suite import Suite, suite
from attnexp.comparison.tables import Comparison, Row, seed_order

DIGITS = 4  # decimals of every value in every table


def fmt(value: float | None, sign: bool = False) -> str:
    """A value with :data:`DIGITS` decimals (``+`` shown when ``sign``), ``-`` when missing."""
    if value is None or math.isnan(value):
        return "-"
    return f"{value:+.{DIGITS}f}" if sign else f"{value:.{DIGITS}f}"


def interval(s: Spread) -> str:
    """``mean [low, high]``, or the mean alone where there is no interval."""
    return "-" if math.isnan(s.mean) else fmt(s.mean) + ("" if s.n < 2 else f" [{fmt(s.low)}, {fmt(s.high)}]")


def tex_interval(s: Spread) -> str:
    """``$mean \\pm half-width$`` of the interval, the mean alone where there is none."""
    if math.isnan(s.mean):
        return "--"
    return f"${fmt(s.mean)}$" if s.n < 2 else f"${fmt(s.mean)} \\pm {fmt((s.high - s.low) / 2)}$"


def tex(text: str) -> str:
    """``text`` with LaTeX's special characters escaped."""
    return "".join("\\" + ch if ch in "&%$#_{}" else ch for ch in text)


def metric_table(rows: list[Row], metric: str, baseline: str, label: str = "config") -> str:
    """One metric: per-seed values, mean, std and interval of every row, and its difference from the baseline."""
    lines = [f"| {label} | n | per seed | mean | std | 95% CI | Δ vs {baseline} [95% CI] | p | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        s, values = row.spreads[metric], row.values[metric]
        std, ci = ("n=1, no spread", "-") if s.n == 1 else (fmt(s.std), f"[{fmt(s.low)}, {fmt(s.high)}]")
        diff = row.diffs.get(metric)
        if row.config == (row.baseline or baseline):
            delta, p, word = "baseline", "", ""
        elif diff is None or math.isnan(diff.mean):
            delta, p, word = "-", "-", "-"
        else:
            delta = fmt(diff.mean, sign=True) + ("" if math.isnan(diff.low) else f" [{fmt(diff.low, True)}, {fmt(diff.high, True)}]")
            p, word = ("-" if math.isnan(diff.p) else f"{diff.p:.3g} ({diff.test})"), row.verdicts[metric]
        name = row.config + (f" ({row.tuned})" if row.tuned else "")
        seeds = ", ".join(fmt(values[k]) for k in sorted(values, key=seed_order)) or "-"
        lines.append("| " + " | ".join(c.replace("|", "/") for c in [name, str(s.n), seeds, fmt(s.mean), std, ci, delta, p, word]) + " |")
    return "\n".join(lines)


def suite_markdown(s: Suite) -> str:
    """The data x mixers table."""
    head = [f"{d} ({s.metric[d]})" for d in s.data]
    lines = ["| mixer | " + " | ".join([*head, "mean score"]) + " |", "|---" * (len(head) + 2) + "|"]
    for m in s.mixers:
        cells = [interval(s.cells[m, d]) + (f" ({s.at_chance[m, d]} at chance)" if s.at_chance[m, d] else "") for d in s.data]
        lines.append(f"| {m} | " + " | ".join([*cells, interval(s.scores[m])]) + " |")
    return (f"### Data x mixers\n\nEach data option's primary metric: mean [95% CI] over seeds. Mean score: per seed, the "
            f"mean over the {len(s.data)} data options (seeds that ran every one), then its mean [95% CI] over seeds. "
            "A run whose best val/acc is at most 1.5 times chance is counted as at chance.\n\n" + "\n".join(lines))


def markdown(c: Comparison) -> str:
    """The summary as Markdown: a table per metric, the data x mixers table, the runs, the tuned table and the warnings."""
    seeds = sorted({r.seed for r in c.runs}, key=seed_order)
    parts = [f"Data {c.data}; epochs: {c.epochs}; {len(c.rows)} configurations; seeds {', '.join(seeds)}. "
             f"Baseline: {c.baseline}. Intervals: 95% Student t over seeds; differences paired by seed (paired t) "
             f"when both have the same seeds, else Welch's t (the sign test where every paired difference is the same); "
             f"a verdict needs p < 0.05."]
    for metric, mode in c.metrics.items():
        better = f"{'higher' if mode == 'max' else 'lower'} is better" if mode else "no better direction"
        parts.append(f"### {metric} ({better})\n\n" + metric_table(c.rows, metric, c.baseline))
    by_data = suite(c)
    if by_data:
        parts.append(suite_markdown(by_data))
    lines = ["| config | runs ok | params | s/epoch | samples/s | status |", "|---|---|---|---|---|---|"]
    for row in c.rows:
        per_s = row.mean_of("train_samples_per_s")
        per_epoch = row.mean_of("seconds_per_epoch")
        lines.append(f"| {row.config} | {len(row.ok)}/{len(row.runs)} | {row.params or '-'} | {'-' if math.isnan(per_epoch) else f'{per_epoch:.2f}'} "
                     f"| {'-' if math.isnan(per_s) else round(per_s)} | {row.status.replace('|', '/')} |")
    parts.append("### Runs\n\n" + "\n".join(lines))
    if c.tuned:
        tables = [f"#### {m}\n\n" + metric_table(c.tuned, m, c.tuned_baseline) for m in c.metrics]
        parts.append(f"### Each configuration at its best {', '.join(c.tune)}\n\nRule: {c.tuned_rule}.\n\n" + "\n\n".join(tables))
    if c.warnings:
        parts.append("### Warnings\n\n" + "\n".join(f"- {w}" for w in c.warnings))
    return "\n\n".join(parts) + "\n"


def tabular(header: list[str], rows: list[list[str]]) -> list[str]:
    """A booktabs ``tabular``: the first column left-aligned, the others right-aligned."""
    lines = ["\\begin{tabular}{l" + "r" * (len(header) - 1) + "}", "\\toprule", " & ".join(header) + " \\\\", "\\midrule"]
    return [*lines, *(" & ".join(r) + " \\\\" for r in rows), "\\bottomrule", "\\end{tabular}"]


def latex(c: Comparison) -> str:
    """Booktabs tables: mean ± 95% interval half-width of every metric per configuration, and per data option."""
    arrows = {"max": " $\\uparrow$", "min": " $\\downarrow$"}
    header = ["Configuration", "$n$", *(tex(m) + arrows.get(mode, "") for m, mode in c.metrics.items())]
    rows = [[tex(row.config), str(len(row.ok)), *(tex_interval(row.spreads[m]) for m in c.metrics)] for row in c.rows]
    text = [f"% Mean over seeds $\\pm$ half-width of the 95\\% Student-t interval. Data {tex(c.data)}, epochs: {c.epochs}. "
            "Written by attnexp.", *tabular(header, rows)]
    by_data = suite(c)
    if by_data:
        rows = [[tex(m), *(tex_interval(by_data.cells[m, d]) for d in by_data.data), tex_interval(by_data.scores[m])] for m in by_data.mixers]
        text += ["", "% Each data option's primary metric, mean over seeds $\\pm$ half-width of the 95\\% interval.",
                 *tabular(["Mixer", *(tex(d) for d in by_data.data), "Mean"], rows)]
    return "\n".join(text) + "\n"
