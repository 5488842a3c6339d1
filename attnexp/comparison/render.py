"""A comparison as Markdown: the summary that is printed, every number through one formatter (:func:`fmt`,
:data:`DIGITS` decimals) that the LaTeX tables (:mod:`attnexp.comparison.latex`) use too, so the two never disagree."""

from __future__ import annotations

import math

from attnexp.comparison.chance import CHANCE_RULE
from attnexp.comparison.fairness import still_improving
from attnexp.comparison.search import Search, rounded
from attnexp.comparison.stats import Difference, Spread
from attnexp.comparison.suite import REPS, Estimate, Suite, seed_order
from attnexp.comparison.summary import Comparison, Table
from attnexp.comparison.tables import Row

DIGITS = 4  # decimals of every value in every table


def fmt(value: float | None, sign: bool = False) -> str:
    """A value with :data:`DIGITS` decimals (``+`` shown when ``sign``), ``-`` when missing."""
    if value is None or math.isnan(value):
        return "-"
    return f"{value:+.{DIGITS}f}" if sign else f"{value:.{DIGITS}f}"


def interval(s: Spread) -> str:
    """``mean [low, high]``, or the mean alone where there is no interval."""
    return "-" if math.isnan(s.mean) else fmt(s.mean) + ("" if s.n < 2 else f" [{fmt(s.low)}, {fmt(s.high)}]")


def seeds_note(row: Row, metric: str) -> str:
    """n, with the seeds whose value is missing (not a finite number) named."""
    missing = row.missing.get(metric) or {}
    n = str(row.spreads[metric].n)
    return (
        n
        if not missing
        else n + " + " + ", ".join(f"seed {k}: {v}" for k, v in sorted(missing.items(), key=lambda i: seed_order(i[0])))
    )


def test_note(diff: Difference) -> str:
    """``p (test)``, with the seeds a paired test left out."""
    if math.isnan(diff.p):
        return "-"
    unpaired = (
        f"; seed{'s' if len(diff.unpaired) > 1 else ''} {', '.join(diff.unpaired)} unpaired" if diff.unpaired else ""
    )
    return f"{diff.p:.3g} ({diff.test}{unpaired})"


def grid_note(row: Row) -> str:
    """The values a tuned row's setting was picked from: ``module.optimizer.lr in {0.001, 0.003}``."""
    return "; ".join(f"{k} in {{{', '.join(v)}}}" for k, v in row.grid.items())


def metric_table(rows: list[Row], metric: str, baseline: str, label: str = "config") -> str:
    """One metric: per-seed values, mean, std and interval of every row, and its difference from the baseline with the
    raw and Holm-adjusted p and the verdict (in the tuned table, after the grid each row was tuned over)."""
    tuned = any(row.grid for row in rows)
    lines = [
        f"| {label} |{' tuned over |' if tuned else ''} n | per seed | mean | std | 95% CI | "
        f"Δ vs {baseline} [95% CI] | p (test) | adjusted p | verdict |",
        "|---" * (10 + tuned) + "|",
    ]
    for row in rows:
        s, values = row.spreads[metric], row.values[metric]
        std, ci = ("n=1, no spread", "-") if s.n == 1 else (fmt(s.std), f"[{fmt(s.low)}, {fmt(s.high)}]")
        diff = row.diffs.get(metric)
        if row.config == row.baseline:
            delta, p, adjusted, word = "baseline", "", "", ""
        elif row.no_baseline:
            delta, p, adjusted, word = "-", "-", "-", row.no_baseline
        elif diff is None or math.isnan(diff.mean):
            delta, p, adjusted, word = "-", "-", "-", "-"
        else:
            delta = fmt(diff.mean, sign=True) + (
                " (no interval)" if math.isnan(diff.low) else f" [{fmt(diff.low, True)}, {fmt(diff.high, True)}]"
            )
            p, word = test_note(diff), row.verdicts[metric]
            adjusted = "-" if math.isnan(diff.p_adjusted) else f"{diff.p_adjusted:.3g}"
        name = row.config + (f" ({row.tuned})" if row.tuned else "")
        seeds = ", ".join(fmt(values[k]) for k in sorted(values, key=seed_order)) or "-"
        cells = [
            name,
            *([grid_note(row)] if tuned else []),
            seeds_note(row, metric),
            seeds,
            fmt(s.mean),
            std,
            ci,
            delta,
            p,
            adjusted,
            word,
        ]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def estimate(e: Estimate | None) -> str:
    """``value [low, high]`` of a bootstrap estimate, the value alone without an interval."""
    if e is None or math.isnan(e.value):
        return "-"
    return fmt(e.value) + ("" if math.isnan(e.low) else f" [{fmt(e.low)}, {fmt(e.high)}]")


def suite_markdown(s: Suite) -> str:
    """The data x mixers table and the aggregates over the data."""
    head = [f"{d} ({s.metric[d]})" for d in s.data]
    lines = [
        "| mixer | " + " | ".join(head) + " |",
        "|---" * (len(head) + 1) + "|",
        "| chance | " + " | ".join(fmt(s.chance[d]) for d in s.data) + " |",
    ]
    for m in s.mixers:
        cells = [
            interval(s.cells[m, d]) + (f" ({s.at_chance[m, d]} at chance)" if s.at_chance[m, d] else "") for d in s.data
        ]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    text = (
        "### Data x mixers\n\nEach data option's primary metric: mean [95% CI] over seeds; chance: the best guess that "
        f"does not solve the task, measured on the data. A run whose best val/acc is at most {CHANCE_RULE} is counted "
        "as at chance.\n\n" + "\n".join(lines)
    )
    agg = s.aggregates
    if agg is None or not agg.scores:
        return text
    improvement = f"P(improvement over {agg.baseline})" if agg.baseline else "P(improvement)"
    table = [f"| mixer | seeds | IQM [95% CI] | mean [95% CI] | {improvement} [95% CI] |", "|---|---|---|---|---|"]
    for m in agg.scores:
        better = "baseline" if m == agg.baseline else estimate(agg.improvement.get(m))
        table.append(
            f"| {m} | {', '.join(agg.seeds[m])} | {estimate(agg.iqm.get(m))} | {estimate(agg.mean.get(m))} | {better} |"
        )
    left_out = f" Left out: {'; '.join(agg.left_out)}." if agg.left_out else ""
    return text + (
        f"\n\n### Aggregates over {len(agg.data)} data options\n\nScores "
        "normalised per data option from its chance (0) "
        "to the best attainable (1), for the seeds that ran every option; the interquartile mean (IQM) and the mean, "
        f"with stratified bootstrap 95% intervals ({REPS} resamples of the runs within each data option); the "
        "probability that a run of the mixer beats a run of the baseline on a data option, averaged over the options "
        f"(rliable, Agarwal et al. 2021). Performance profile: performance_profile.png.{left_out}\n\n"
        + "\n".join(table)
    )


def search_markdown(s: Search) -> str:
    """The trials of a search ranked by its objective, the best marked, and how to compare the best over seeds."""
    lines = ["| rank | " + " | ".join(s.keys) + f" | {s.objective} | status |", "|---" * (len(s.keys) + 3) + "|"]
    for i, t in enumerate(s.trials, 1):
        rank = f"{i} (best)" if t is s.best else str(i)
        status = t.run.metrics.get("status", "?")
        lines.append(
            f"| {rank} | "
            + " | ".join(rounded(t.values.get(k, "-")) for k in s.keys)
            + f" | {fmt(t.objective)} | {status} |"
        )
    text = (
        f"### Search: {len(s.trials)} trials by {s.objective} ({'highest' if s.maximize else 'lowest'} first)\n\n"
        "Each trial ran one setting with one seed: a ranking, not a comparison (the best of many single runs is "
        "partly luck). Values are rounded to 3 significant digits.\n\n" + "\n".join(lines)
    )
    if s.best is not None:
        text += (
            f"\n\nTo compare the best setting with the baseline mixer over seeds, run it again and summarise that "
            f"sweep (or give its folder to attnexp-compare together with this one):\n\n    {s.rerun()}"
        )
    return text


def role(t: Table, metric: str) -> str:
    """``primary`` for the first metric the task names, ``secondary`` for its others, ``added`` for ``columns``."""
    mode = t.metrics[metric]
    better = f"{'higher' if mode == 'max' else 'lower'} is better" if mode else "no better direction"
    kind = "added" if not mode else "primary" if metric == t.primary else "secondary"
    return f"{kind}; {better}"


def headline(t: Table) -> str:
    """The primary metric's verdicts, one per compared configuration, and the rows compared with none."""
    said = [
        f"{row.config} vs {row.baseline}: {row.verdicts[t.primary]}"
        if row.baseline
        else f"{row.config}: {row.no_baseline}"
        for row in t.rows
        if t.primary in row.verdicts
    ]
    return f"**Primary metric {t.primary}.** " + ("; ".join(said) + "." if said else "No configuration was compared.")


METHOD = (
    "Intervals: 95% Student t over seeds, cut at a metric's bounds (accuracies stay within [0, 1]). Differences are "
    "paired by seed (paired t) on the seeds both configurations have, Welch's t when they share fewer than 2; the "
    "sign test where every paired difference is the same (it has no interval). The primary metric answers the "
    "comparison; the others are secondary, reported in support. p-values are adjusted over each table's "
    "comparisons of one metric (Holm): the primary metric's comparisons are the family the verdicts above rest on. "
    "Verdicts: better or worse when the adjusted p is below 0.05 and the difference exceeds the margin; equivalent "
    "when two one-sided tests put it within ±margin (adjusted p below 0.05); inconclusive otherwise, with the seeds "
    "that would decide at the observed spread (power 0.8). A verdict from fewer than 3 seeds, or resting on runs "
    "still improving at their last epoch, says so; configurations trained with different budgets (or tuned over "
    "different grids) are not compared, and a configuration is compared only with a baseline of its own task and "
    "data that ran the same code. A value that is not a finite number is missing: named after n, left out of the "
    "statistics."
)


def facts(t: Table) -> str:
    """What a table's runs are: data, epochs, configurations, seeds, baseline and where its margins come from."""
    seeds = sorted({r.seed for r in t.runs}, key=seed_order)
    margins = "; ".join(f"{m}: {', '.join(sources)}" for m, sources in t.margins.items())
    return (
        f"Data {t.data}; epochs: {t.epochs}; {len(t.rows)} configurations; seeds {', '.join(seeds)}. "
        f"Baseline: {t.baseline or 'none'}. Primary metric: {t.primary}. Margins: {margins or 'none'}."
    )


def table_markdown(t: Table) -> list[str]:
    """One table's parts: a table per metric (the primary first), its runs and its tuned tables."""
    parts = [f"### {m} ({role(t, m)})\n\n" + metric_table(t.rows, m, t.baseline) for m in t.metrics]
    lines = [
        "| config | runs ok | params | weights | s/epoch | samples/s | still improving | status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in t.rows:
        per_s, per_epoch = row.mean_of("train_samples_per_s"), row.mean_of("seconds_per_epoch")
        epoch = "-" if math.isnan(per_epoch) else f"{per_epoch:.2f}"
        lines.append(
            f"| {row.config} | {len(row.ok)}/{len(row.runs)} | {row.params or '-'} | {row.weight_kind} | {epoch}"
            f"{side_by_side(row)} | {'-' if math.isnan(per_s) else round(per_s)} "
            f"| {still_improving(row)} | {row.status.replace('|', '/')} |"
        )
    parts.append("### Runs\n\n" + "\n".join(lines) + "\n\n" + RUNS_NOTE)
    if t.tuned:
        tables = [f"#### {m} ({role(t, m)})\n\n" + metric_table(t.tuned, m, t.tuned_baseline) for m in t.metrics]
        parts.append(
            f"### Each configuration at its best {', '.join(t.tune)}\n\nRule: {t.tuned_rule}.\n\n" + "\n\n".join(tables)
        )
    return parts


def markdown(c: Comparison) -> str:
    """The summary as Markdown: per table (one per task and data set) its primary metric's verdicts, a table per
    metric, the runs and the tuned table; then the data x mixers table, the search and the warnings."""
    parts: list[str] = []
    if len(c.tables) == 1:
        t = c.tables[0]
        parts += [headline(t), f"{facts(t)} {METHOD}", *table_markdown(t)]
    elif c.tables:
        labels = ", ".join(t.label for t in c.tables)
        parts.append(
            f"{len(c.tables)} tables, one per task and data set ({labels}): each has its own primary metric, "
            f"baselines and families of tests. {METHOD}"
        )
        for t in c.tables:
            parts += [f"## {t.label}", headline(t), facts(t), *table_markdown(t)]
    if c.suite:
        parts.append(suite_markdown(c.suite))
    if c.search:
        parts.append(search_markdown(c.search))
    if c.warnings:
        parts.append("### Warnings\n\n" + "\n".join(f"- {w}" for w in c.warnings))
    return "\n\n".join(parts) + "\n"


RUNS_NOTE = (
    "weights: what the mixers say their weights are (weight_kind: distributions, non-negative or signed), which the "
    'telemetry and the figures read them as. s/epoch and samples/s are wall-clock means; "side by side" marks runs '
    "of a sweep whose jobs ran at once on shared cores, slower than alone and not comparable with runs that had the "
    "machine to themselves. "
    "Still improving: runs whose checkpoint metric was still rising at their last epoch (best at the last "
    "validation, and more than its margin above the best before the last quarter of the epochs)."
)


def side_by_side(row: Row) -> str:
    """`` (side by side: 2 jobs)`` where the row's runs shared the cores with other jobs of their sweep."""
    jobs = max((int(r.metrics.get("parallel_jobs") or 1) for r in row.ok), default=1)
    return f" (side by side: {jobs} jobs)" if jobs > 1 else ""
