"""A comparison of finished runs, whole: one table per task and data set (each with its own primary metric, baselines
and families of tests), each configuration at its best tuned setting, the data x mixers view, a search's ranking and
the warnings (:func:`compare`)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from attnexp.comparison import naming
from attnexp.comparison.cautions import cautions
from attnexp.comparison.runs import Run, left_out_notes
from attnexp.comparison.search import Search, search
from attnexp.comparison.suite import Suite, suite
from attnexp.comparison.tables import Row, baseline_spec, fill, group, matches, named_baseline, natural
from attnexp.comparison.tuning import tuned_rows

DEFAULT_SUMMARY = {"test/acc": "max", "val/acc_best": "max", "test/loss": "min"}  # for a task that names none
DEFAULT_TUNE = ("module.optimizer.lr",)


@dataclass
class Table:
    """The runs of one task and data set: their configurations compared on the task's own metrics."""

    label: str  # data=digits (with the task, or the data set's id, where they tell tables apart)
    runs: list[Run]
    metrics: dict[str, str]  # metric -> "max" or "min" ("" for an added column): the task's summary, primary first
    baseline: str  # the baseline configuration, or the settings that make one for each learning rate (model=dot)
    rows: list[Row]
    tune: list[str]  # tuned keys the runs vary
    tuned: list[Row]  # each configuration at its best tuned setting (empty when nothing is tuned)
    tuned_rule: str
    tuned_baseline: str
    margins: dict[str, list[str]] = field(default_factory=dict)  # metric -> where its margins come from
    prefix: str = ""  # of its plots' files, where the comparison has several tables

    @property
    def data(self) -> str:
        return ", ".join(sorted({str(r.metrics.get("data")) for r in self.runs}))

    @property
    def primary(self) -> str:
        """The metric that answers the comparison: the first its task names."""
        return next((m for m, mode in self.metrics.items() if mode), next(iter(self.metrics), ""))

    @property
    def epochs(self) -> str:
        found = sorted({r.metrics["epochs"] for r in self.runs if "epochs" in r.metrics})
        return "-".join(map(str, found[:: max(1, len(found) - 1)])) if found else "?"


@dataclass
class Comparison:
    """Everything a summary shows."""

    runs: list[Run]
    tables: list[Table]
    tune: list[str]
    warnings: list[str]
    search: Search | None = None  # the trials of hyperparameter searches among the runs
    suite: Suite | None = None  # the data x mixers view, when the runs have several tables

    @property
    def rows(self) -> list[Row]:
        return [row for t in self.tables for row in t.rows]


def compare(
    runs: list[Run],
    baseline: str | None = None,
    tune: Sequence[str] = DEFAULT_TUNE,
    columns: Sequence[str] = (),
    margin: Mapping[str, float] | None = None,
    ignore: Sequence[str] = (),
) -> Comparison:
    """Group ``runs`` (named by :func:`attnexp.comparison.naming.find_runs`) into one table per task and data set, and
    in each compare every configuration with its baseline: ``baseline``, a config name or settings such as
    ``model=dot`` (default ``model=dot`` when present, else the first row), in the same table with the same code.
    ``columns``: more metrics.json keys to compare (no better direction: their verdicts say higher or lower).
    ``margin``: per metric, the difference below which configurations count as equivalent (defaults:
    :func:`attnexp.comparison.margins.margin`). The trials of a hyperparameter search are summarised apart
    (:mod:`attnexp.comparison.search`). Runs that cannot be compared are left out, each with a note among the
    warnings. ``ignore``: the keys that named no configuration (their budgets are not compared either)."""
    found = search(runs)
    runs = found.others if found else runs
    notes, runs = left_out_notes(runs), [r for r in runs if r.comparable]
    refuse_duplicates(runs)
    by_table: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_table[run.table].append(run)
    tables = [
        table(label, members, baseline, tune, columns, margin or {}, ignore)
        for label, members in sorted(by_table.items(), key=lambda item: natural(item[0]))
    ]
    if baseline and tables and not any(matches(row, baseline) for t in tables for row in t.rows):
        configs = ", ".join(row.config for t in tables for row in t.rows)
        raise ValueError(f"no configuration matches the baseline {baseline!r}; the configurations are: {configs}")
    for t in tables:
        t.prefix = re.sub(r"[^\w.=-]+", "_", t.label).strip("_") + "_" if len(tables) > 1 else ""
    warned = [w for t in tables for w in cautions(t.rows, t.label if len(tables) > 1 else "")]
    views = [(t.label, {row.config: row.runs for row in t.rows}, t.primary) for t in tables]
    return Comparison(
        runs,
        tables,
        list(dict.fromkeys(k for t in tables for k in t.tune)),
        [*naming.notes(runs), *warned, *notes],
        found,
        suite(
            views,
            baseline or ("model=dot" if any(r.named.get("model") == "dot" for t in tables for r in t.rows) else ""),
        ),
    )


def table(
    label: str,
    runs: list[Run],
    baseline: str | None,
    tune: Sequence[str],
    columns: Sequence[str],
    margin: Mapping[str, float],
    ignore: Sequence[str],
) -> Table:
    """The table of one task and data set's runs."""
    metrics = summary_metrics(runs) | dict.fromkeys(columns, "")
    tuned_keys = [k for k in tune if any(k in r.settings for r in runs)]
    rows = group(runs)
    spec = baseline_spec(rows, baseline)
    sources = fill(rows, metrics, spec, margin, ignore, baseline or "")
    tuned, rule, tuned_base = tuned_rows(runs, tuned_keys, metrics, baseline, margin, ignore)
    return Table(
        label,
        runs,
        metrics,
        named_baseline(rows, spec, baseline or ""),
        rows,
        tuned_keys,
        tuned,
        rule,
        tuned_base,
        sources,
    )


class RepeatedSeeds(ValueError):
    """The same configuration and seed finished more than once among the runs given: no comparison counts them."""


def refuse_duplicates(runs: list[Run]) -> None:
    """Two finished runs of one configuration and seed are not two replicates: the seed fixes the split, the batches
    and the initialisation, so the second repeats the first. Refuse them, naming the folders."""
    folders: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for run in runs:
        if run.ok:
            folders[run.identity, run.table, run.seed].append(str(run.folder))
    tables = {r.table for r in runs}
    repeated = {
        (
            next(r.config() for r in runs if r.identity == i and r.table == t)
            + (f" on {t}" if len(tables) > 1 else ""),
            s,
        ): f
        for (i, t, s), f in folders.items()
        if len(f) > 1
    }
    if repeated:
        listed = "; ".join(
            f"{config} seed {seed} in {' and '.join(found)}" for (config, seed), found in sorted(repeated.items())
        )
        raise RepeatedSeeds(
            f"the same configuration and seed finished more than once ({listed}). A repeated seed repeats the "
            "same split, batches and initialisation, so it is not another replicate and cannot be counted "
            "as one. Give the folders of one sweep, or move the repeated run folders elsewhere; new "
            "replicates need new seeds (seed=3,4,5)."
        )


def summary_metrics(runs: list[Run]) -> dict[str, str]:
    """The metrics the runs' task names (in order; one task per table), those a run has values for."""
    named: dict[str, str] = {}
    for run in runs:
        named.update({k: v for k, v in run.metrics.get("summary") or DEFAULT_SUMMARY.items() if k not in named})
    return {k: v for k, v in named.items() if any(k in r.metrics for r in runs)} or dict(DEFAULT_SUMMARY)
