"""Naming configurations: runs are grouped by what ran, and each group named by what tells it apart from the others.

What ran is a run's settings (its fingerprint: :mod:`attnexp.settings`) and the source of its mixer classes
(:mod:`attnexp.runs.provenance`). A configuration's name lists, the mixer first:

- the config-group options that differ (``model=euclid``), unless they follow from the options already named (the
  data picks the network);
- the keys an override set that differ (``module.optimizer.lr=0.01``);
- in brackets, the keys no override set that differ and do not follow from the above: a config file or a default
  changed between the runs (``model=diff (lambda_init=0.2)``);
- in brackets, ``source changed: 3f2a…`` for each later version of a mixer's source than the first run's.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnexp.comparison.runs import ABSENT, Run, read_runs
from attnexp.runs import metrics_file
from attnexp.runs.identity import digest as fingerprint
from attnexp.settings import NOT_METHOD, flat, left_out, method

HASH_SHOWN = 4  # hex digits of a source hash in a name: ``source changed: 3f2a…``


def find_runs(paths: Sequence[str | Path], ignore: Sequence[str] = ()) -> list[Run]:
    """Every run folder under ``paths``, named by what tells the comparable ones' configurations apart (a run stopped
    by bad input, or that trained nothing, names nothing). Keys in ``ignore`` name nothing: runs that differ only
    there are seeds of one configuration (budgets matched run by run). Runs whose records hold their settings are
    told apart by those (:func:`by_settings`); where one does not, all are named by the
    command-line overrides that differ, as records of older versions were."""
    runs = read_runs(paths)
    named = [r for r in runs if r.comparable] or runs
    if named and all(r.recorded for r in named):
        by_settings(runs, named, ignore)
    else:
        by_overrides(runs, named, ignore)
    return runs


def typed_keys(run: Run) -> set[str]:
    """The keys (and group names) of a run's command-line overrides: ``module.optimizer.lr``, ``model``."""
    return {o.lstrip("+~").split("=", 1)[0] for o in run.overrides if "=" in o}


def choices(run: Run, ignore: Sequence[str]) -> dict[str, str]:
    """The config-group options of a run that can change its method (``model``, ``data``, ``module/scheduler``...)."""
    found = run.metrics.get("choices") or {
        "model": metrics_file.mixer(run.metrics),
        "data": str(run.metrics.get("data")),
    }
    return {
        g: str(o)
        for g, o in found.items()
        if not g.startswith("hydra") and o is not None and not left_out(g.replace("/", "."), (*NOT_METHOD, *ignore))
    }


def started(run: Run) -> float:
    """When the run started (its folder's Hydra files were written), for ordering source versions."""
    for path in (run.folder / ".hydra", run.folder / metrics_file.FILE):
        if path.exists():
            return path.stat().st_mtime
    return 0.0


def sources_id(mixers: dict[str, dict[str, Any]] | None) -> str:
    return ",".join(f"{name}={entry.get('sha256')}" for name, entry in sorted((mixers or {}).items()))


def identity(run: Run, ignore: Sequence[str]) -> tuple[str, str]:
    return fingerprint(method(run.metrics["config"], ignore)), sources_id(run.metrics.get("mixers"))


def by_settings(runs: list[Run], named: list[Run], ignore: Sequence[str]) -> None:
    """Name ``runs`` (in place) by what tells the configurations of ``named`` apart (module docstring)."""
    ids = {id(r): identity(r, ignore) for r in named}
    for fp, sources in set(ids.values()):  # a run that stopped before its mixers were recorded: the only version
        known = {s for f, s in ids.values() if f == fp and s}
        if not sources and len(known) == 1:
            only = next(iter(known))
            ids = {k: (f, only if (f, s) == (fp, "") else s) for k, (f, s) in ids.items()}
    groups: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in named:
        groups[ids[id(run)]].append(run)
    opts = {key: options_of(members, ignore) for key, members in groups.items()}
    values = {key: flat(method(members[0].metrics["config"], ignore)) for key, members in groups.items()}
    typed = set().union(*(typed_keys(r) for r in named)) if named else set()
    shown_groups = named_groups(opts, typed)
    groups_typed = {g for o in opts.values() for g in o}
    shown_keys, unlisted = named_keys(
        values, {k: [o[g] for g in shown_groups] for k, o in opts.items()}, typed - groups_typed
    )
    if not shown_groups and len(shown_keys) == len(unlisted):  # no override tells them apart: the mixer names them
        shown_groups = ["model"]
    settings = {
        key: {
            **{g: opts[key][g] for g in shown_groups if opts[key][g]},
            **{k: values[key].get(k, ABSENT) for k in shown_keys},
        }
        for key in groups
    }
    versions = source_versions(groups, settings)
    for key, members in groups.items():
        for run in members:
            run.settings, run.unlisted, run.version = (
                {**settings[key], "seed": str(run.metrics.get("seed"))},
                frozenset(unlisted),
                versions[key],
            )
    for run in runs:
        if id(run) not in ids:  # left out of comparisons: named by its overrides where they set the keys shown
            given = dict(o.lstrip("+~").split("=", 1) for o in run.overrides if "=" in o)
            own = {**given, **choices(run, ignore)}
            run.settings = {k: own[k] for k in [*shown_groups, *shown_keys] if k in own} | {
                "seed": str(run.metrics.get("seed"))
            }


def options_of(members: list[Run], ignore: Sequence[str]) -> dict[str, str]:
    """The group options of a configuration's runs; ``""`` for a group whose option differs between them (two
    options with the same settings, ``trainer=cpu`` and ``trainer=default`` on a CPU): it cannot name them."""
    found: dict[str, set[str]] = defaultdict(set)
    for run in members:
        for group, option in choices(run, ignore).items():
            found[group].add(option)
    return defaultdict(str, {g: next(iter(o)) if len(o) == 1 else "" for g, o in found.items()})


def follows(values: dict[Any, str], given: dict[Any, tuple]) -> bool:
    """Whether ``values`` (per configuration) is a function of ``given`` (per configuration)."""
    seen: dict[tuple, str] = {}
    return all(seen.setdefault(given[k], v) == v for k, v in values.items())


def named_groups(opts: dict[Any, dict[str, str]], typed: set[str]) -> list[str]:
    """The groups whose options differ between configurations, the mixer first, the data second; a group no override
    chose is named only where it does not follow from those before it (the data picks the network)."""
    groups = sorted({g for o in opts.values() for g in o}, key=lambda g: (g != "model", g != "data", g))
    shown: list[str] = []
    for group in groups:
        found = {k: o[group] for k, o in opts.items()}
        if len(set(found.values())) < 2 or "" in found.values():
            continue
        if group in typed or not follows(found, {k: tuple(o[g] for g in shown) for k, o in opts.items()}):
            shown.append(group)
    return shown


def named_keys(
    values: dict[Any, dict[str, str]], given: dict[Any, list[str]], typed: set[str]
) -> tuple[list[str], list[str]]:
    """The keys whose values differ between configurations: those an override set (``typed``: keys, not groups), then
    those that do not follow from the groups and keys already named (``unlisted``)."""
    keys = sorted({k for v in values.values() for k in v})
    differ = [k for k in keys if len({v.get(k) for v in values.values()}) > 1]
    listed = [k for k in differ if any(left_out(k, (t,)) for t in typed)]
    known = {key: (*given[key], *(v.get(k) for k in listed)) for key, v in values.items()}
    unlisted = [
        k
        for k in differ
        if k not in listed and not follows({key: v.get(k, ABSENT) for key, v in values.items()}, known)
    ]
    return [*listed, *unlisted], unlisted


def source_versions(groups: dict[tuple[str, str], list[Run]], settings: dict[Any, dict[str, str]]) -> dict[Any, str]:
    """``source changed: 3f2a…`` for configurations named alike that ran another version of their mixers' source than
    the first of them to start; ``""`` for the others."""
    alike: dict[tuple, list[tuple[str, str]]] = defaultdict(list)
    for key in groups:
        alike[tuple(sorted(settings[key].items()))].append(key)
    versions = dict.fromkeys(groups, "")
    for keys in alike.values():
        if len(keys) < 2:
            continue
        keys.sort(key=lambda k: min(started(r) for r in groups[k]))
        first = groups[keys[0]][0].metrics.get("mixers") or {}
        changed = {}
        for key in keys[1:]:
            mixers = groups[key][0].metrics.get("mixers") or {}
            changed[key] = next(
                (
                    str(e.get("sha256"))
                    for name, e in sorted(mixers.items())
                    if (first.get(name) or {}).get("sha256") != e.get("sha256")
                ),
                "",
            )
        digits = HASH_SHOWN
        while digits < 12 and len({h[:digits] for h in changed.values()}) < len(changed):
            digits += 2
        for key, sha in changed.items():
            versions[key] = f"source changed: {sha[:digits]}…" if sha else f"settings {key[0][:6]}"
    return versions


def by_overrides(runs: list[Run], named: list[Run], ignore: Sequence[str]) -> None:
    """Name ``runs`` (in place) by the command-line overrides that differ between ``named``, seed aside: how runs
    whose records do not hold their settings are told apart."""
    found = {}
    for run in runs:
        settings = {"model": metrics_file.mixer(run.metrics), "data": str(run.metrics.get("data"))}
        settings.update(dict(o.lstrip("+~").split("=", 1) for o in run.overrides if "=" in o))
        found[id(run)] = settings
    keys = sorted({k for r in named for k in found[id(r)]} - {"resume", *ignore})
    varying = [k for k in keys if len({found[id(r)].get(k) for r in named}) > 1 and k != "seed"] or ["model"]
    for run in runs:
        run.settings = {k: found[id(run)][k] for k in [*varying, "seed"] if k in found[id(run)]}


def shown_path(path: str | None) -> str:
    """A source file as a reader finds it: relative to the working directory when inside it."""
    if not path:
        return "?"
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def notes(runs: Sequence[Run]) -> list[str]:
    """What the summary says about the naming: records without settings, settings no override set that differ, and
    mixer sources that changed between runs."""
    found = []
    old = [r for r in runs if not r.recorded]
    if old:
        found.append(
            f"{len(old)} of {len(runs)} runs were recorded without their settings (metrics.json of an earlier "
            "attnexp): configurations are named by the command-line overrides that differ, so settings or "
            "code that changed without an override cannot be told apart."
        )
        return found
    by_name: dict[str, Run] = {}
    for run in runs:
        by_name.setdefault(run.config(), run)
    for key in sorted({k for r in runs for k in r.unlisted}):
        seen = sorted(
            {(r.settings.get(key, ABSENT), name) for name, r in by_name.items()} - {(ABSENT, n) for n in by_name}
        )
        listed = "; ".join(f"{value} in {name}" for value, name in seen)
        found.append(
            f"{key} differs between runs although no override set it ({listed}): a config file or a default "
            "changed between them, so they are different configurations."
        )
    for name, run in by_name.items():
        if run.version.startswith("source changed"):
            first = next(
                (r for n, r in by_name.items() if not r.version and r.settings == {**run.settings, "seed": r.seed}),
                None,
            )
            before = (first.metrics.get("mixers") or {}) if first else {}
            files = ", ".join(
                f"{cls} in {shown_path(e.get('file'))}: {str((before.get(cls) or {}).get('sha256'))[:12]} in "
                f"{first.config() if first else 'the first runs'}, {str(e.get('sha256'))[:12]} here"
                for cls, e in sorted((run.metrics.get("mixers") or {}).items())
                if (before.get(cls) or {}).get("sha256") != e.get("sha256")
            )
            found.append(
                f"{name} ran another version of its mixer's source than the first runs named alike ({files}): "
                "the code changed between them, and each version is a configuration of its own."
            )
    return found
