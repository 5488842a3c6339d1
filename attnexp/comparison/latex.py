"""A comparison as LaTeX: booktabs tables ready for a paper, every number through the summary's formatter
(:func:`attnexp.comparison.render.fmt`)."""

from __future__ import annotations

import math

from attnexp.comparison.render import fmt
from attnexp.comparison.stats import Spread
from attnexp.comparison.suite import Estimate
from attnexp.comparison.summary import Comparison


def tex(text: str) -> str:
    """``text`` with LaTeX's special characters escaped."""
    return "".join("\\" + ch if ch in "&%$#_{}" else ch for ch in text)


def tex_estimate(e: Estimate | None) -> str:
    """``$value\\,[low, high]$`` of a bootstrap estimate (its interval is not symmetric), ``--`` without one."""
    if e is None or math.isnan(e.value):
        return "--"
    return f"${fmt(e.value)}$" if math.isnan(e.low) else f"${fmt(e.value)}\\,[{fmt(e.low)}, {fmt(e.high)}]$"


def tex_interval(s: Spread) -> str:
    """``$mean \\pm half-width$`` of the interval (``[low, high]`` where a bound cut it), the mean alone where
    there is none."""
    if math.isnan(s.mean):
        return "--"
    if s.n < 2:
        return f"${fmt(s.mean)}$"
    if fmt(s.high - s.mean) != fmt(s.mean - s.low):  # cut at a bound: no longer symmetric
        return f"${fmt(s.mean)}\\,[{fmt(s.low)}, {fmt(s.high)}]$"
    return f"${fmt(s.mean)} \\pm {fmt((s.high - s.low) / 2)}$"


def tabular(header: list[str], rows: list[list[str]]) -> list[str]:
    """A booktabs ``tabular``: the first column left-aligned, the others right-aligned."""
    lines = [
        "\\begin{tabular}{l" + "r" * (len(header) - 1) + "}",
        "\\toprule",
        " & ".join(header) + " \\\\",
        "\\midrule",
    ]
    return [*lines, *(" & ".join(r) + " \\\\" for r in rows), "\\bottomrule", "\\end{tabular}"]


def latex(c: Comparison) -> str:
    """Booktabs tables: mean ± 95% interval half-width of every metric per configuration, one per task and data set,
    and per data option."""
    arrows = {"max": " $\\uparrow$", "min": " $\\downarrow$"}
    text: list[str] = []
    for t in c.tables:
        header = ["Configuration", "$n$", *(tex(m) + arrows.get(mode, "") for m, mode in t.metrics.items())]
        rows = [
            [tex(row.config), str(len(row.ok)), *(tex_interval(row.spreads[m]) for m in t.metrics)] for row in t.rows
        ]
        text += [
            *([""] if text else []),
            f"% {tex(t.label)}: mean over seeds $\\pm$ half-width of the 95\\% Student-t interval. Data {tex(t.data)}, "
            f"epochs: {t.epochs}. Written by attnexp.",
            *tabular(header, rows),
        ]
    by_data = c.suite
    if by_data:
        rows = [[tex(m), *(tex_interval(by_data.cells[m, d]) for d in by_data.data)] for m in by_data.mixers]
        text += [
            "",
            "% Each data option's primary metric, mean over seeds $\\pm$ half-width of the 95\\% interval.",
            *tabular(["Mixer", *(tex(d) for d in by_data.data)], rows),
        ]
        agg = by_data.aggregates
        if agg and agg.scores:
            rows = [
                [
                    tex(m),
                    tex_estimate(agg.iqm.get(m)),
                    tex_estimate(agg.mean.get(m)),
                    tex_estimate(agg.improvement.get(m)),
                ]
                for m in agg.scores
            ]
            text += [
                "",
                "% Normalised scores (chance 0, best 1) over the data options: IQM and mean with stratified bootstrap "
                f"95\\% intervals, probability of improvement over {tex(agg.baseline or '-')}.",
                *tabular(["Mixer", "IQM", "Mean", "P(improvement)"], rows),
            ]
    return "\n".join(text) + "\n"
