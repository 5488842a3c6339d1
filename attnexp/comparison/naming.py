"""Naming configurations: runs are grouped by what ran, and each group named by what tells it apart from the others of
its table.

What ran is a run's identity (:mod:`attnexp.runs.identity`): its method settings, the code it imported and the data
it read, recomputed from its record with the ``--ignore`` keys left out. Runs of one task and data set form a table
(:func:`table_of`); within it a configuration's name lists, the mixer first:

- the config-group options that differ (``model=euclid``), unless they follow from the options already named;
- the keys an override set that differ (``module.optimizer.lr=0.01``);
- in brackets, the keys no override set that differ and do not follow from the above: a config file or a default
  changed between the runs (``model=diff (lambda_init=0.2)``);
- in brackets, the code where configurations of the table ran other versions of a file: ``code:
  attnexp/data/digits.py 3f2a…`` (the version's hash), so runs of other code are never one configuration.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attnexp.comparison.runs import ABSENT, OVERRIDES, Run, read_runs
from attnexp.comparison.search import is_trial
from attnexp.runs.identity import differing_code, digest, key, method_choices
from attnexp.runs.settings import flat, left_out, method

HASH_SHOWN = 4  # hex digits of a code version in a name: ``code: attnexp/data/digits.py 3f2a…``
FILES_SHOWN = 2  # files named in a code version's name; the others counted


def find_runs(paths: Sequence[str | Path], ignore: Sequence[str] = ()) -> list[Run]:
    """Every run folder under ``paths``; the comparable ones grouped into tables (one per task and data set) and named
    by what tells their configurations apart within their table. Keys in ``ignore`` name nothing: runs that differ
    only there are seeds of one configuration (budgets matched run by run)."""
    runs = read_runs(paths)
    usable = [r for r in runs if r.comparable]
    tables: dict[str, list[Run]] = defaultdict(list)
    for run, label in zip(usable, table_labels(usable)):
        run.table = label
        tables[label].append(run)
    for members in tables.values():
        ids = {"code": known(members, "code"), "dataset": known(members, "dataset")}
        for run in members:
            run.identity = identity(run, ignore, ids)
        name([r for r in members if not is_trial(r)], ignore)  # a search's trials are named by what it searched
    return runs


def table_of(run: Run) -> tuple[str, str, str]:
    """What a table holds: one task, one data option and one data set (the files read, or the generator's settings)."""
    choices = run.metrics.get("choices") or {}
    return str(choices.get("task")), str(choices.get("data")), str((run.metrics.get("dataset") or {}).get("id"))


def table_labels(runs: list[Run]) -> list[str]:
    """Each run's table named by its data option, with the task where one data option has several and the data set's
    id where one task and data option read several."""
    keys = [table_of(r) for r in runs]
    if any(d == "None" for _, _, d in keys):  # a run that stopped before it read its data: the data set of its option
        sets = defaultdict(set)
        for task, data, found in keys:
            sets[task, data].add(found)
        keys = [(t, d, next(iter(sets[t, d] - {"None"})) if len(sets[t, d] - {"None"}) == 1 else i) for t, d, i in keys]
    tasks, ids = defaultdict(set), defaultdict(set)
    for task, data, found in keys:
        tasks[data].add(task)
        ids[task, data].add(found)
    return [
        f"data={data}"
        + (f",task={task}" if len(tasks[data]) > 1 else "")
        + (f" (data set {found[:HASH_SHOWN]}…)" if len(ids[task, data]) > 1 else "")
        for task, data, found in keys
    ]


def known(runs: list[Run], part: str) -> str | None:
    """The one ``code`` or ``dataset`` id of runs that record it, for those that stopped before they could; None where
    the runs ran several."""
    found = {str((r.metrics.get(part) or {}).get("id")) for r in runs} - {"None"}
    return next(iter(found)) if len(found) == 1 else None


def identity(run: Run, ignore: Sequence[str], ids: Mapping[str, str | None]) -> str:
    """The run's configuration: its identity recomputed with the ``ignore`` keys (and groups) left out."""
    record = run.metrics
    parts = {p: str((record.get(p) or {}).get("id") or ids[p]) for p in ("code", "dataset")}
    chosen = {g: o for g, o in (record.get("choices") or {}).items() if not left_out(g.replace("/", "."), ignore)}
    return key(chosen, record["config"], parts["code"], parts["dataset"], ignore)


def typed_keys(runs: list[Run]) -> set[str] | None:
    """The keys (and group names) the runs' command lines set: ``module.optimizer.lr``, ``model``; None where a record
    does not hold its overrides (then every key that differs names its configurations)."""
    if any(OVERRIDES not in r.metrics for r in runs):
        return None
    return {o.lstrip("+~").split("=", 1)[0] for r in runs for o in r.overrides if "=" in o}


def choices(run: Run, ignore: Sequence[str]) -> dict[str, str]:
    """The config-group options of a run that can change its method (``model``, ``data``, ``module/scheduler``...)."""
    found = method_choices(run.metrics.get("choices") or {})
    return {g: o for g, o in found.items() if not left_out(g.replace("/", "."), ignore)}


def name(runs: list[Run], ignore: Sequence[str]) -> None:
    """Name ``runs`` (of one table; in place) by what tells their configurations apart (module docstring)."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        groups[run.identity].append(run)
    opts = {k: options_of(members, ignore) for k, members in groups.items()}
    values = {k: flat(method(members[0].metrics["config"], ignore)) for k, members in groups.items()}
    typed = typed_keys(runs)
    shown_groups = named_groups(opts, typed)
    groups_typed = {g for o in opts.values() for g in o}
    shown_keys, unlisted = named_keys(
        values,
        {k: [o[g] for g in shown_groups] for k, o in opts.items()},
        None if typed is None else typed - groups_typed,
    )
    if not shown_groups and len(shown_keys) == len(unlisted):  # no override tells them apart: the mixer names them
        shown_groups = ["model"]
    settings = {
        k: {
            **{g: opts[k][g] for g in shown_groups if opts[k][g]},
            **{s: values[k].get(s, ABSENT) for s in shown_keys},
        }
        for k in groups
    }
    codes = {k: members[0].metrics.get("code") or {} for k, members in groups.items()}
    versions = code_versions(codes)

    def named_alike() -> dict[tuple, list[str]]:
        found: dict[tuple, list[str]] = defaultdict(list)
        for k in groups:
            found[tuple(sorted(settings[k].items())), versions[k][0]].append(k)
        return {name: ks for name, ks in found.items() if len(ks) > 1}

    for alike in named_alike().values():  # differ in code no name looks at (a module one imported): say which
        versions.update(code_versions({k: codes[k] for k in alike}, differing_code))
    still = {k for ks in named_alike().values() for k in ks}
    for k, members in groups.items():
        label, files = versions[k]
        for run in members:
            run.settings = {**settings[k], "seed": str(run.metrics.get("seed"))}
            run.unlisted, run.version = frozenset(unlisted), label or (f"identity {k[:6]}" if k in still else "")
            run.code_files = files


def options_of(members: list[Run], ignore: Sequence[str]) -> dict[str, str]:
    """The group options of a configuration's runs; ``""`` for a group whose option differs between them (two
    options with the same settings): it cannot name them."""
    found: dict[str, set[str]] = defaultdict(set)
    for run in members:
        for group, option in choices(run, ignore).items():
            found[group].add(option)
    return defaultdict(str, {g: next(iter(o)) if len(o) == 1 else "" for g, o in found.items()})


def follows(values: dict[Any, str], given: dict[Any, tuple]) -> bool:
    """Whether ``values`` (per configuration) is a function of ``given`` (per configuration)."""
    seen: dict[tuple, str] = {}
    return all(seen.setdefault(given[k], v) == v for k, v in values.items())


def named_groups(opts: dict[Any, dict[str, str]], typed: set[str] | None) -> list[str]:
    """The groups whose options differ between configurations, the mixer first, the data second; a group no override
    chose is named only where it does not follow from those before it (the data picks the network)."""
    groups = sorted({g for o in opts.values() for g in o}, key=lambda g: (g != "model", g != "data", g))
    shown: list[str] = []
    for group in groups:
        found = {k: o[group] for k, o in opts.items()}
        if len(set(found.values())) < 2 or "" in found.values():
            continue
        chosen = typed is None or group in typed
        if chosen or not follows(found, {k: tuple(o[g] for g in shown) for k, o in opts.items()}):
            shown.append(group)
    return shown


def named_keys(
    values: dict[Any, dict[str, str]], given: dict[Any, list[str]], typed: set[str] | None
) -> tuple[list[str], list[str]]:
    """The keys whose values differ between configurations: those an override set (``typed``: keys, not groups; None:
    every key), then those that do not follow from the groups and keys already named (``unlisted``)."""
    keys = sorted({k for v in values.values() for k in v})
    differ = [k for k in keys if len({v.get(k) for v in values.values()}) > 1]
    listed = [k for k in differ if typed is None or any(left_out(k, (t,)) for t in typed)]
    known_ = {k: (*given[k], *(v.get(s) for s in listed)) for k, v in values.items()}
    unlisted = [
        s for s in differ if s not in listed and not follows({k: v.get(s, ABSENT) for k, v in values.items()}, known_)
    ]
    return [*listed, *unlisted], unlisted


def code_differs(here: Mapping[str, Any], there: Mapping[str, Any]) -> list[str]:
    """The source files two runs ran in other versions: attnexp's, and the user's modules that both imported (a module
    only one imported is its own mixer's)."""
    a, b = here.get("files") or {}, there.get("files") or {}
    return [f for f in differing_code(here, there) if f.startswith("attnexp/") or (f in a and f in b)]


def code_versions(
    codes: dict[str, Mapping[str, Any]], differ: Callable[..., list[str]] = code_differs
) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Per configuration, ``code: attnexp/data/digits.py 3f2a…`` and the files it names: its version of the files
    that ``differ`` finds between configurations of the table (the file's hash, or a hash of its files'), ``code:
    without mta.py`` for files it did not import that others did (``differ``: every file, for configurations of one
    name); ``""`` where none differs."""
    recorded = {k: c["files"] for k, c in codes.items() if c.get("files")}
    files = sorted({f for a in codes.values() for b in codes.values() for f in differ(a, b)})
    versions: dict[str, tuple[str, str]] = {}
    for k, hashes in recorded.items():
        own = [f for f in files if f in hashes]
        if own:
            hashed = hashes[own[0]] if len(own) == 1 else digest([hashes[f] for f in own])
            versions[k] = (listed(own), hashed)
    digits = HASH_SHOWN
    while digits < 12 and len({(n, h[:digits]) for n, h in versions.values()}) < len(set(versions.values())):
        digits += 2
    found = {k: (f"code: {versions[k][0]} {versions[k][1][:digits]}…", tuple(files)) for k in versions}
    if differ is differing_code:  # a file no name looked at because only some imported it
        absent = {k: [f for f in files if f not in (recorded.get(k) or {})] for k in codes}
        without = {k: f"code: without {listed(absent[k])}" for k in codes if k not in found and absent[k]}
        found |= {k: (label, tuple(files)) for k, label in without.items()}
    return {k: found.get(k, ("", ())) for k in codes}


def listed(files: list[str]) -> str:
    """The first :data:`FILES_SHOWN` files, the others counted."""
    more = f" and {len(files) - FILES_SHOWN} more" if len(files) > FILES_SHOWN else ""
    return ", ".join(files[:FILES_SHOWN]) + more


def notes(runs: Sequence[Run]) -> list[str]:
    """What the summary says about the naming: settings no override set that differ, and code that differs between
    configurations of a table."""
    found = []
    tables = {r.table for r in runs}
    for table in sorted(tables):
        where = f"{table}: " if len(tables) > 1 else ""
        by_name: dict[str, Run] = {}
        for run in (r for r in runs if r.table == table):
            by_name.setdefault(run.config(), run)
        for k in sorted({k for r in by_name.values() for k in r.unlisted}):
            seen = sorted({(r.settings.get(k, ABSENT), n) for n, r in by_name.items()} - {(ABSENT, n) for n in by_name})
            listed = "; ".join(f"{value} in {n}" for value, n in seen)
            found.append(
                f"{where}{k} differs between runs although no override set it ({listed}): a config file or a default "
                "changed between them, so they are different configurations."
            )
        versions = {n: r for n, r in by_name.items() if r.version.startswith("code:")}
        if versions:
            codes = {n: r.metrics.get("code") or {} for n, r in versions.items()}
            files = sorted({f for r in versions.values() for f in r.code_files})
            said = "; ".join(
                f"{f}: " + ", ".join(f"{(codes[n].get('files') or {}).get(f, 'absent')} in {n}" for n in sorted(codes))
                for f in files[:5]
            ) + (f"; and {len(files) - 5} more files" if len(files) > 5 else "")
            found.append(
                f"{where}the runs ran other versions of the code ({said}): each version is a configuration of its "
                "own, and a configuration is compared only with a baseline that ran the same code."
            )
    return found
