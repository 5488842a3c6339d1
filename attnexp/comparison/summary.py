"""A comparison of finished runs, whole: the rows of every configuration, each configuration at its best tuned setting,
the data x mixers view, a search's ranking and the warnings (:func:`compare`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from attnexp.comparison import naming
from attnexp.comparison.cautions import cautions
from attnexp.comparison.runs import Run, left_out_notes
from attnexp.comparison.search import Search, search
from attnexp.comparison.suite import Suite, suite
from attnexp.comparison.tables import Row, baseline_spec, fill, group, pick_baseline
from attnexp.comparison.tuning import tuned_rows

DEFAULT_SUMMARY = {
    "test/acc": "max",
    "val/acc_best": "max",
    "test/loss": "min",
}  # records written before tasks named theirs
DEFAULT_TUNE = ("module.optimizer.lr",)


@dataclass
class Comparison:
    """Everything a summary shows."""

    runs: list[Run]
    metrics: dict[str, str]  # metric -> "max" or "min"
    baseline: str  # the baseline configuration, or the settings that make one for each data or difficulty (model=dot)
    rows: list[Row]
    tune: list[str]  # tuned keys the runs vary
    tuned: list[Row]  # each configuration at its best tuned setting (empty when nothing is tuned)
    tuned_rule: str
    tuned_baseline: str
    warnings: list[str]
    margins: dict[str, list[str]] = field(default_factory=dict)  # metric -> where its margins come from
    search: Search | None = None  # the trials of hyperparameter searches among the runs
    suite: Suite | None = None  # the data x mixers view, when the runs vary the data

    @property
    def data(self) -> str:
        return ", ".join(sorted({str(r.metrics.get("data")) for r in self.runs}))

    @property
    def primary(self) -> str:
        """The metric that answers the comparison: the first its runs' tasks name."""
        return next((m for m, mode in self.metrics.items() if mode), next(iter(self.metrics), ""))

    @property
    def epochs(self) -> str:
        found = sorted({r.metrics["epochs"] for r in self.runs if "epochs" in r.metrics})
        return "-".join(map(str, found[:: max(1, len(found) - 1)])) if found else "?"


def compare(
    runs: list[Run],
    baseline: str | None = None,
    tune: Sequence[str] = DEFAULT_TUNE,
    columns: Sequence[str] = (),
    margin: Mapping[str, float] | None = None,
    ignore: Sequence[str] = (),
) -> Comparison:
    """Group ``runs`` by configuration and compare every configuration with ``baseline`` (a config name or one of
    its settings such as ``model=dot``; default ``model=dot`` when present, else the first row). ``columns``: more
    metrics.json keys to compare (no better direction: their verdicts say higher or lower). ``margin``: per metric,
    the difference below which configurations count as equivalent (defaults: :func:`margins.margin`). The trials of
    a hyperparameter search are summarised apart (:mod:`attnexp.comparison.search`). Runs stopped by bad input or
    that trained or validated nothing are left out, each with a note among the warnings. ``ignore``: the keys that
    named no configuration (their budgets are not compared either)."""
    found = search(runs)
    runs = found.others if found else runs
    notes, runs = left_out_notes(runs), [r for r in runs if r.comparable]
    refuse_duplicates(runs)
    metrics = summary_metrics(runs) | dict.fromkeys(columns, "")
    tuned_keys = [k for k in tune if any(k in r.settings for r in runs)]
    rows = group(runs)
    base = pick_baseline(rows, baseline)
    spec = baseline_spec(base, baseline)
    sources = fill(rows, base, metrics, spec, margin or {}, ignore)
    tuned, rule, tuned_base = tuned_rows(runs, tuned_keys, metrics, baseline, margin or {}, ignore)
    named = (
        ",".join(f"{k}={v}" for k, v in spec.items())
        if len({r.baseline for r in rows}) > 1
        else (base.config if base else "")
    )
    return Comparison(
        runs,
        metrics,
        named,
        rows,
        tuned_keys,
        tuned,
        rule,
        tuned_base,
        [*naming.notes(runs), *cautions(rows, base), *notes],
        sources,
        found,
        suite(runs, named),
    )


def refuse_duplicates(runs: list[Run]) -> None:
    """Two finished runs of one configuration and seed are not two replicates: the seed fixes the split, the batches
    and the initialisation, so the second repeats the first. Refuse them, naming the folders."""
    folders: dict[tuple[str, str], list[str]] = defaultdict(list)
    for run in runs:
        if run.ok:
            folders[run.config(), run.seed].append(str(run.folder))
    repeated = {key: found for key, found in folders.items() if len(found) > 1}
    if repeated:
        listed = "; ".join(
            f"{config} seed {seed} in {' and '.join(found)}" for (config, seed), found in sorted(repeated.items())
        )
        raise ValueError(
            f"the same configuration and seed finished more than once ({listed}). A repeated seed repeats the "
            "same split, batches and initialisation, so it is not another replicate and cannot be counted "
            "as one. Give the folders of one sweep, or move the repeated run folders elsewhere; new "
            "replicates need new seeds (seed=3,4,5)."
        )


def summary_metrics(runs: list[Run]) -> dict[str, str]:
    """The metrics the runs' tasks name (union, in order), those a run has values for."""
    named: dict[str, str] = {}
    for run in runs:
        named.update({k: v for k, v in run.metrics.get("summary") or DEFAULT_SUMMARY.items() if k not in named})
    return {k: v for k, v in named.items() if any(k in r.metrics for r in runs)} or dict(DEFAULT_SUMMARY)
