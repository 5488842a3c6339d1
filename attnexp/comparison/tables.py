"""A table of the comparison (the runs of one task and data set): one row per configuration (seeds grouped) with
intervals, and the difference from a baseline of the same table with a test and a verdict, or why it has none.

Built from run folders (:func:`attnexp.comparison.naming.find_runs`) at the end of every sweep and by
``attnexp-compare`` (:func:`attnexp.comparison.summary.compare`); trains nothing.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from attnexp.comparison import fairness, margins
from attnexp.comparison.naming import code_differs
from attnexp.comparison.runs import ABSENT, Run
from attnexp.comparison.stats import Difference, Spread, adjust, difference, finite, spread, verdict
from attnexp.runs.settings import left_out


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
    no_baseline: str = ""  # why it is compared with none ("no baseline: no run of model=dot,... on data=digits")
    named: dict[str, str] = field(default_factory=dict)  # the settings that name it (seed and tuned keys aside)
    grid: dict[str, tuple[str, ...]] = field(default_factory=dict)  # tuned key -> the values its runs tried
    members: list[Run] = field(default_factory=list)  # in the tuned table, the runs of every tuned value

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
    def weight_kind(self) -> str:
        """What its mixers say their weights are (``weight_kind``): one kind, or each mixer's; ``-`` where unknown."""
        kind = next((r.metrics["weight_kind"] for r in self.runs if r.metrics.get("weight_kind")), "-")
        return ", ".join(dict.fromkeys(kind)) if isinstance(kind, list) else str(kind)

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


def fill(
    rows: list[Row],
    metrics: dict[str, str],
    spec: Mapping[str, str] | None,
    given: Mapping[str, float] | None = None,
    ignore: Sequence[str] = (),
    wanted: str = "",
) -> dict[str, list[str]]:
    """Per-seed values, spreads, and differences from each row's baseline with verdicts, for every row (of one table)
    and metric; returns where each metric's margins come from.

    A row's baseline is the row of its table named like it but with ``spec``'s settings (:func:`own_baseline`): a
    sweep over learning rates or difficulties compares the mixers at each. Without one the row says there is none
    (``spec`` None: the baseline ``wanted`` names no row here). A row whose budget (or, tuned, whose grid) differs
    from its baseline's is not compared: its verdict says why and how to complete it, and it is no member of the
    family. The p-values of one metric's comparisons are one family, adjusted together (Holm). A verdict says what it
    rests on: fewer than 3 seeds, runs still improving; first, when every run of both stayed at chance."""
    for row in rows:
        for metric in metrics:
            recorded = {r.seed: r.metrics[metric] for r in row.ok if metric in r.metrics}
            row.values[metric] = finite(recorded)
            row.missing[metric] = {seed: str(v) for seed, v in recorded.items() if seed not in row.values[metric]}
            row.spreads[metric] = spread(list(row.values[metric].values()), margins.bounds(metric))
    for row in rows:
        missing = f"no baseline: no run of {wanted} on {row.runs[0].table or 'these data'}"
        chosen, row.no_baseline = own_baseline(rows, row, spec) if spec is not None else (None, missing)
        row.baseline = chosen.config if chosen else ""
        row.verdicts = dict.fromkeys(metrics, row.no_baseline) if row.no_baseline else {}
    by_config = {r.config: r for r in rows}
    compared = [r for r in rows if r.baseline and r.config != r.baseline]
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
            against = by_config[row.baseline]
            caveats = fairness.caveats(row, against, diff.n) if diff.test != "none" else []
            said = f"{said} ({'; '.join(caveats)})" if caveats else said
            row.verdicts[metric] = f"all runs at chance; {said}" if fairness.all_at_chance(row, against) else said
        for row, diff in zip(compared, diffs):
            if refused[row.config]:
                row.diffs[metric], row.verdicts[metric] = diff, str(refused[row.config])
    return sources


def baseline_spec(rows: list[Row], wanted: str | None) -> dict[str, str] | None:
    """The settings that make a row of a table a baseline: those ``wanted`` names (``model=dot``: the dot row of each
    learning rate or difficulty; a whole configuration's name: its settings); by default ``model=dot`` where the rows
    name a mixer (the first row's mixer where none is dot), else every setting of the first row (one baseline for
    all). None where ``wanted`` names no row of the table."""
    if wanted:
        found = [r for r in rows if matches(r, wanted)]
        if not found:
            return None
        exact = next((r for r in found if r.config == wanted), None)
        return dict(exact.named) if exact else dict(part.split("=", 1) for part in wanted.split(","))
    mixers = [r.named.get("model") for r in rows]
    if rows and all(mixers):
        return {"model": "dot" if "dot" in mixers else str(mixers[0])}
    return dict(rows[0].named) if rows else {}


def own_baseline(rows: list[Row], row: Row, spec: Mapping[str, str]) -> tuple[Row | None, str]:
    """The row of ``row``'s table named like it but with ``spec``'s values (the settings under a group it sets, a
    mixer's own options, go with it) that ran the same code; ``row`` itself where it is one. Else None and why."""
    free = tuple(k.replace("/", ".") for k in spec)

    def kept(named: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in named.items() if k not in spec and not left_out(k.replace("/", "."), free)}

    same = [r for r in rows if all(r.named.get(k) == v for k, v in spec.items()) and kept(r.named) == kept(row.named)]
    code = row.runs[0].metrics.get("code") or {}
    found = sorted(
        (r for r in same if not code_differs(code, r.runs[0].metrics.get("code") or {})),
        key=lambda r: (r is not row, natural(r.config)),
    )
    if found:
        return found[0], ""
    if same:
        files = code_differs(code, same[0].runs[0].metrics.get("code") or {})
        return (
            None,
            f"no baseline: {same[0].config} ran other code ({', '.join(files[:2])}{', ...' * (len(files) > 2)})",
        )
    wanted = ",".join(f"{k}={v}" for k, v in {**spec, **kept(row.named)}.items() if v != ABSENT)
    return None, f"no baseline: no run of {wanted} on {row.runs[0].table or 'these data'}"


def named_baseline(rows: list[Row], spec: Mapping[str, str] | None, wanted: str = "") -> str:
    """How a table names its baseline: the one row the others are compared with, else the settings that make one
    (``model=dot``, where each learning rate or difficulty has its own); ``wanted`` where no row is one."""
    found = {r.baseline for r in rows if r.baseline}
    if len(found) == 1:
        return next(iter(found))
    return ",".join(f"{k}={v}" for k, v in spec.items()) if spec is not None else wanted
