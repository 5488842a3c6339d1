"""The comparison's tables: one row per configuration (seeds grouped) with intervals, and the difference from a
baseline with a test and a verdict.

Built from run folders (:func:`attnexp.comparison.naming.find_runs`) at the end of every sweep and by
``attnexp-compare``
(:func:`attnexp.comparison.summary.compare`); trains nothing.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from attnexp.comparison import fairness, margins
from attnexp.comparison.runs import Run
from attnexp.comparison.stats import Difference, Spread, adjust, difference, finite, spread, verdict


@dataclass
class Row:
    """One configuration: its runs, and per metric its values by seed, their spread and the difference from the
    baseline."""

    config: str
    runs: list[Run]
    values: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> seed -> value (finite ones)
    missing: dict[str, dict[str, str]] = field(
        default_factory=dict
    )  # metric -> seed -> what an ok run recorded instead
    spreads: dict[str, Spread] = field(default_factory=dict)
    diffs: dict[str, Difference] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    tuned: str = ""  # the tuned values this row stands for, in the tuned table
    baseline: str = ""  # the configuration this row is compared with (itself for a baseline)
    named: dict[str, str] = field(default_factory=dict)  # the settings that name it (seed and tuned keys aside)
    grid: dict[str, tuple[str, ...]] = field(default_factory=dict)  # tuned key -> the values its runs tried
    members: list[Run] = field(default_factory=list)  # in the tuned table, the runs of every tuned value

    @property
    def ok(self) -> list[Run]:
        return [r for r in self.runs if r.ok]

    @property
    def version(self) -> str:
        return self.runs[0].version if self.runs else ""

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
        return "; ".join(
            f"seed {r.seed} {r.metrics.get('status', '?')}"
            + (f": {r.metrics['error'].splitlines()[0][:120]}" if r.metrics.get("error") else "")
            for r in bad
        )


def group(runs: list[Run], leave_out: Sequence[str] = ()) -> list[Row]:
    """One row per configuration (named without the keys in ``leave_out``), in natural order."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        groups[run.config(leave_out)].append(run)
    return [
        Row(config, members, named={k: v for k, v in members[0].settings.items() if k not in ("seed", *leave_out)})
        for config, members in sorted(groups.items(), key=lambda item: natural(item[0]))
    ]


def natural(name: str) -> list:
    """Sort key that orders numbers inside names by value: ``num_pairs=4`` before ``num_pairs=16``."""
    return [
        (0, float(part), "") if i % 2 else (1, 0.0, part) for i, part in enumerate(re.split(r"(\d+(?:\.\d+)?)", name))
    ]


def matches(row: Row, wanted: str) -> bool:
    """Whether ``row`` is the configuration ``wanted`` names: its whole name, or settings it has (``model=dot``)."""
    pairs = [part.split("=", 1) for part in wanted.split(",")]
    return row.config == wanted or all(len(p) == 2 and row.named.get(p[0]) == p[1] for p in pairs)


def pick_baseline(rows: list[Row], wanted: str | None) -> Row | None:
    """The row ``wanted`` names (the first version of a mixer's source where several ran), by default ``model=dot``
    when present, else the first row."""
    if not rows:
        return None
    ordered = sorted(rows, key=lambda r: bool(r.version))
    if wanted:
        found = [r for r in ordered if matches(r, wanted)]
        if not found:
            configs = ", ".join(r.config for r in rows)
            raise ValueError(f"no configuration matches the baseline {wanted!r}; the configurations are: {configs}")
        return found[0]
    return next((r for r in ordered if r.named.get("model") == "dot"), rows[0])


def fill(
    rows: list[Row],
    base: Row | None,
    metrics: dict[str, str],
    spec: dict[str, str] | None = None,
    given: Mapping[str, float] | None = None,
    ignore: Sequence[str] = (),
) -> dict[str, list[str]]:
    """Per-seed values, spreads, and differences from each row's baseline with verdicts, for every row and metric;
    returns where each metric's margins come from.

    A row's baseline is the row named like it but with ``spec``'s settings (``model=dot``): a sweep over data or
    difficulties compares the mixers within each data or difficulty. Without such a row (or ``spec``), ``base``.
    A row whose budget (or, tuned, whose grid) differs from its baseline's is not compared: its verdict says why and
    how to complete it, and it is no member of the family. The p-values of one metric's comparisons are one family,
    adjusted together (Holm). A verdict says what it rests on: fewer than 3 seeds, runs still improving."""
    for row in rows:
        for metric in metrics:
            recorded = {r.seed: r.metrics[metric] for r in row.ok if metric in r.metrics}
            row.values[metric] = finite(recorded)
            row.missing[metric] = {seed: str(v) for seed, v in recorded.items() if seed not in row.values[metric]}
            row.spreads[metric] = spread(list(row.values[metric].values()), margins.bounds(metric))
    for row in rows:
        chosen = own_baseline(rows, row, spec or {}) or base
        row.baseline = chosen.config if chosen else ""
    by_config = {r.config: r for r in rows}
    compared = [r for r in rows if base is not None and r.config != r.baseline]
    refused = {
        r.config: fairness.unequal_grid(r, by_config[r.baseline])
        or fairness.unequal_budget(r, by_config[r.baseline], ignore)
        for r in compared
    }
    sources: dict[str, list[str]] = {}
    for metric, mode in metrics.items():
        diffs = []
        for row in compared:
            against = by_config[row.baseline]
            m, source = margins.margin(metric, mode, against.ok, against.spreads[metric].mean, given or {})
            sources.setdefault(metric, [])
            if source not in sources[metric]:
                sources[metric].append(source)
            diffs.append(difference(against.values[metric], row.values[metric], m, margins.bounds(metric)))
        family = [(row, d) for row, d in zip(compared, diffs) if not refused[row.config]]
        for (row, _), diff in zip(family, adjust([d for _, d in family])):
            row.diffs[metric] = diff
            said = verdict(diff, higher_is_better=mode == "max" if mode else None)
            caveats = fairness.caveats(row, by_config[row.baseline], diff.n) if diff.test != "none" else []
            row.verdicts[metric] = f"{said} ({'; '.join(caveats)})" if caveats else said
        for row, diff in zip(compared, diffs):
            if refused[row.config]:
                row.diffs[metric], row.verdicts[metric] = diff, str(refused[row.config])
    return sources


def own_baseline(rows: list[Row], row: Row, spec: dict[str, str]) -> Row | None:
    """The row named like ``row`` but with ``spec``'s values for the settings both name (the first version of a
    mixer's source where several ran; ``row`` itself where it is one), if there is one."""
    wanted = {k: spec.get(k, v) for k, v in row.named.items()}
    found = sorted((r for r in rows if r.named == wanted), key=lambda r: bool(r.version))
    return found[0] if found else None


def baseline_spec(base: Row | None, wanted: str | None) -> dict[str, str]:
    """The settings that make a configuration a baseline: those of ``wanted`` (``model=dot``: the dot row of each data),
    ``model=dot`` by default, or all of the baseline row's (one baseline for all)."""
    if base is None:
        return {}
    if wanted and wanted != base.config:
        pairs = [part.split("=", 1) for part in wanted.split(",")]
        if all(len(p) == 2 for p in pairs):
            return dict(pairs)
    if not wanted and base.named.get("model") == "dot":
        return {"model": "dot"}
    return dict(base.named)
