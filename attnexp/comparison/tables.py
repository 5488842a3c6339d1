"""The comparison's tables: one row per configuration (seeds grouped) with intervals, the difference from a
baseline with a test and a verdict, each configuration at its best tuned setting, and warnings.

Built from run folders (:func:`attnexp.runs.folders.find_runs`) at the end of every sweep and by
``attnexp-compare``; trains nothing.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from attnexp.comparison import margins
from attnexp.comparison.chance import at_chance, best_acc, chance
from attnexp.comparison.search import Search, search
from attnexp.comparison.stats import Difference, Spread, adjust, difference, finite, spread, verdict
from attnexp.comparison.suite import Suite, suite
from attnexp.runs.folders import Run, left_out_notes

DEFAULT_SUMMARY = {"test/acc": "max", "val/acc_best": "max", "test/loss": "min"}  # records written before tasks named theirs
DEFAULT_TUNE = ("module.optimizer.lr",)
PARAMS_TOLERANCE = 0.10  # compared configurations whose parameter counts differ by more are flagged


@dataclass
class Row:
    """One configuration: its runs, and per metric its values by seed, their spread and the difference from the baseline."""

    config: str
    runs: list[Run]
    values: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> seed -> value (finite ones)
    missing: dict[str, dict[str, str]] = field(default_factory=dict)  # metric -> seed -> what an ok run recorded instead
    spreads: dict[str, Spread] = field(default_factory=dict)
    diffs: dict[str, Difference] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    tuned: str = ""  # the tuned values this row stands for, in the tuned table
    baseline: str = ""  # the configuration this row is compared with (itself for a baseline)

    @property
    def ok(self) -> list[Run]:
        return [r for r in self.runs if r.ok]

    def mean_of(self, key: str) -> float:
        values = list(finite({str(i): r.metrics.get(key) for i, r in enumerate(self.ok)}).values())
        return sum(values) / len(values) if values else math.nan

    @property
    def params(self) -> int | None:
        return next((r.metrics["params"] for r in self.runs if "params" in r.metrics), None)

    @property
    def status(self) -> str:
        bad = [r for r in self.runs if not r.ok]
        if not bad:
            return "ok"
        return "; ".join(f"seed {r.seed} {r.metrics.get('status', '?')}" + (f": {r.metrics['error'].splitlines()[0][:120]}" if r.metrics.get("error") else "") for r in bad)


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
    def epochs(self) -> str:
        found = sorted({r.metrics["epochs"] for r in self.runs if "epochs" in r.metrics})
        return "-".join(map(str, found[:: max(1, len(found) - 1)])) if found else "?"


def compare(runs: list[Run], baseline: str | None = None, tune: Sequence[str] = DEFAULT_TUNE, columns: Sequence[str] = (),
            margin: Mapping[str, float] | None = None) -> Comparison:
    """Group ``runs`` by configuration and compare every configuration with ``baseline`` (a config name or one of
    its settings such as ``model=dot``; default ``model=dot`` when present, else the first row). ``columns``: more
    metrics.json keys to compare (no better direction: their verdicts say higher or lower). ``margin``: per metric,
    the difference below which configurations count as equivalent (defaults: :func:`margins.margin`). The trials of
    a hyperparameter search are summarised apart (:mod:`attnexp.comparison.search`). Runs stopped by bad input or
    that trained or validated nothing are left out, each with a note among the warnings."""
    found = search(runs)
    runs = found.others if found else runs
    notes, runs = left_out_notes(runs), [r for r in runs if r.comparable]
    refuse_duplicates(runs)
    metrics = summary_metrics(runs) | dict.fromkeys(columns, "")
    tuned_keys = [k for k in tune if any(k in r.settings for r in runs)]
    rows = group(runs, lambda r: r.config())
    base = pick_baseline(rows, baseline)
    spec = baseline_spec(base, baseline)
    sources = fill(rows, base, metrics, spec, margin or {})
    tuned, rule, tuned_base = tuned_rows(runs, tuned_keys, metrics, baseline, margin or {})
    named = ",".join(f"{k}={v}" for k, v in spec.items()) if len({r.baseline for r in rows}) > 1 else (base.config if base else "")
    return Comparison(runs, metrics, named, rows, tuned_keys, tuned, rule, tuned_base, [*warnings(rows, base), *notes], sources, found,
                      suite(runs, named))


def refuse_duplicates(runs: list[Run]) -> None:
    """Two finished runs of one configuration and seed are not two replicates: the seed fixes the split, the batches
    and the initialisation, so the second repeats the first. Refuse them, naming the folders."""
    folders: dict[tuple[str, str], list[str]] = defaultdict(list)
    for run in runs:
        if run.ok:
            folders[run.config(), run.seed].append(str(run.folder))
    repeated = {key: found for key, found in folders.items() if len(found) > 1}
    if repeated:
        listed = "; ".join(f"{config} seed {seed} in {' and '.join(found)}" for (config, seed), found in sorted(repeated.items()))
        raise ValueError(f"the same configuration and seed finished more than once ({listed}). A repeated seed repeats the "
                         "same split, batches and initialisation, so it is not another replicate and cannot be counted "
                         "as one. Give the folders of one sweep, or move the repeated run folders elsewhere; new "
                         "replicates need new seeds (seed=3,4,5).")


def summary_metrics(runs: list[Run]) -> dict[str, str]:
    """The metrics the runs' tasks name (union, in order), those a run has values for."""
    named: dict[str, str] = {}
    for run in runs:
        named.update({k: v for k, v in run.metrics.get("summary") or DEFAULT_SUMMARY.items() if k not in named})
    return {k: v for k, v in named.items() if any(k in r.metrics for r in runs)} or dict(DEFAULT_SUMMARY)


def group(runs: list[Run], name) -> list[Row]:
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        groups[name(run)].append(run)
    return [Row(config, members) for config, members in sorted(groups.items(), key=lambda item: natural(item[0]))]


def natural(name: str) -> list:
    """Sort key that orders numbers inside names by value: ``num_pairs=4`` before ``num_pairs=16``."""
    return [(0, float(part), "") if i % 2 else (1, 0.0, part) for i, part in enumerate(re.split(r"(\d+(?:\.\d+)?)", name))]


def pick_baseline(rows: list[Row], wanted: str | None) -> Row | None:
    if not rows:
        return None
    if wanted:
        matches = [r for r in rows if r.config == wanted or wanted in r.config.split(",")]
        if not matches:
            raise ValueError(f"no configuration matches the baseline {wanted!r}; the configurations are: {', '.join(r.config for r in rows)}")
        return matches[0]
    return next((r for r in rows if "model=dot" in r.config.split(",")), rows[0])


def fill(rows: list[Row], base: Row | None, metrics: dict[str, str], spec: dict[str, str] | None = None,
         given: Mapping[str, float] | None = None) -> dict[str, list[str]]:
    """Per-seed values, spreads, and differences from each row's baseline with verdicts, for every row and metric;
    returns where each metric's margins come from.

    A row's baseline is the row named like it but with ``spec``'s settings (``model=dot``): a sweep over data or
    difficulties compares the mixers within each data or difficulty. Without such a row (or ``spec``), ``base``.
    The p-values of one metric's comparisons are one family, adjusted together (Holm)."""
    by_config = {r.config: r for r in rows}
    for row in rows:
        for metric in metrics:
            recorded = {r.seed: r.metrics[metric] for r in row.ok if metric in r.metrics}
            row.values[metric] = finite(recorded)
            row.missing[metric] = {seed: str(v) for seed, v in recorded.items() if seed not in row.values[metric]}
            row.spreads[metric] = spread(list(row.values[metric].values()), margins.bounds(metric))
    for row in rows:
        own = by_config.get(with_settings(row.config, spec or {}))
        row.baseline = (own or base).config if (own or base) else ""
    sources: dict[str, list[str]] = {}
    for metric, mode in metrics.items():
        compared = [r for r in rows if base is not None and r.config != r.baseline]
        diffs = []
        for row in compared:
            against = by_config[row.baseline]
            m, source = margins.margin(metric, mode, against.ok, against.spreads[metric].mean, given or {})
            sources.setdefault(metric, [])
            if source not in sources[metric]:
                sources[metric].append(source)
            diffs.append(difference(against.values[metric], row.values[metric], m, margins.bounds(metric)))
        for row, diff in zip(compared, adjust(diffs)):
            row.diffs[metric] = diff
            row.verdicts[metric] = verdict(diff, higher_is_better=mode == "max" if mode else None)
    return sources


def with_settings(config: str, settings: dict[str, str]) -> str:
    """``config`` (``model=euclid,data=mqar``) with the values of ``settings`` for the keys it has."""
    pairs = [part.split("=", 1) for part in config.split(",")]
    return ",".join(f"{p[0]}={settings.get(p[0], p[1])}" if len(p) == 2 else p[0] for p in pairs)


def baseline_spec(base: Row | None, wanted: str | None) -> dict[str, str]:
    """The settings that make a configuration a baseline: those of ``wanted`` (``model=dot``: the dot row of each data),
    ``model=dot`` by default, or all of the baseline row's (one baseline for all)."""
    if base is None:
        return {}
    named = wanted or ("model=dot" if "model=dot" in base.config.split(",") else base.config)
    pairs = [s.split("=", 1) for s in named.split(",") if "=" in s]
    return dict(pairs) if pairs else dict(base.runs[0].settings)


def tuned_rows(runs: list[Run], keys: list[str], metrics: dict[str, str], baseline: str | None,
               given: Mapping[str, float] | None = None) -> tuple[list[Row], str, str]:
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
    fill(chosen, base, metrics, {k: v for k, v in baseline_spec(base, baseline).items() if k not in keys}, given)
    return chosen, rule, base.config if base else ""


def warnings(rows: list[Row], base: Row | None) -> list[str]:
    """Parameter counts that differ from the row's baseline's by more than 10%; runs left at chance."""
    found = []
    by_config = {r.config: r for r in rows}
    for row in rows:
        own = by_config.get(row.baseline, base)
        if own is not None and own.params and row.params and abs(row.params - own.params) > PARAMS_TOLERANCE * own.params:
            found.append(f"{row.config} has {row.params:,} parameters, {row.params / own.params:.2f}x the baseline's "
                         f"{own.params:,}: a difference may come from size, not from the mechanism.")
    for row in rows:
        for run in row.ok:
            if at_chance(run):
                found.append(f"{row.config} seed {run.seed} stayed at chance: best val/acc {best_acc(run):.4f}, chance "
                             f"{chance(run):.4f}; it learnt nothing (learning rate, epochs?).")
    return found
