"""The runs under some folders: each run folder's record (``metrics.json``) as it stands now, or why it cannot be
compared: a file that is no whole record (truncated, not JSON) or a record of another schema is named and left out,
never read by guesses. Each run is named by what distinguishes its configuration from the others of its table (see
:mod:`attnexp.comparison.naming`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnexp.runs import metrics_file
from attnexp.runs.identity import other_schema

ABSENT = "absent"  # a setting's value in a configuration whose config has no such key: not part of its name
DAMAGED = "damaged"  # the status of a metrics.json that is no record: left out, with a note naming the file
OVERRIDES = "overrides"  # the record's field of the command line's overrides, as typed (``module.optimizer.lr=0.01``)


@dataclass
class Run:
    """One run folder's record (its status as it stands now: see :func:`metrics_file.current_status`) and the
    settings that name its configuration."""

    folder: Path
    metrics: dict[str, Any]
    settings: dict[str, str] = field(default_factory=dict)  # what tells the configurations apart (seed included)
    unlisted: frozenset[str] = frozenset()  # settings no override set (a config file or a default changed): in brackets
    version: str = ""  # "code: attnexp/data/digits.py 3f2a…" where configurations of one table ran other code
    code_files: tuple[str, ...] = ()  # the files its version names
    problem: str = ""  # why its record cannot be compared (damaged, another schema): named and left out
    identity: str = ""  # of its configuration: settings, code and data (seed and --ignore keys aside)
    table: str = ""  # the task and data set it is compared on (``data=digits``)

    @property
    def seed(self) -> str:
        return self.settings.get("seed", str(self.metrics.get("seed")))

    @property
    def ok(self) -> bool:
        return self.metrics.get("status") == metrics_file.OK

    @property
    def comparable(self) -> bool:
        return not self.problem and metrics_file.comparable(str(self.metrics.get("status")))

    @property
    def overrides(self) -> list[str]:
        """The command line's overrides of the run (empty where its record does not hold them)."""
        return [str(o) for o in self.metrics.get(OVERRIDES) or []]

    def config(self, leave_out: Sequence[str] = ()) -> str:
        """The configuration's name: its settings, the mixer first, seed (and ``leave_out``) aside; settings that no
        override set, and the code, in brackets: ``model=diff (lambda_init=0.2)``."""
        keys = sorted(
            (k for k, v in self.settings.items() if k not in ("seed", *leave_out) and v != ABSENT),
            key=lambda k: (k != "model", k),
        )
        listed = [k for k in keys if k not in self.unlisted]
        nodes = [k.replace("/", ".") + "." for k in listed if "." not in k]
        extra = [
            f"{next((k.removeprefix(n) for n in nodes if k.startswith(n)), k)}={self.settings[k]}"
            for k in keys
            if k in self.unlisted
        ] + ([self.version] if self.version else [])
        name = ",".join(f"{k}={self.settings[k]}" for k in listed)
        if not name:
            name = f"model={metrics_file.mixer(self.metrics)}" if extra else "all runs"
        return name + (f" ({'; '.join(extra)})" if extra else "")


def read_runs(paths: Sequence[str | Path]) -> list[Run]:
    """Every run folder (holding metrics.json) under ``paths``, unnamed; a folder under two of them counts once."""
    found: dict[Path, Path] = {}
    for root in paths:
        for file in (folder / metrics_file.FILE for folder in metrics_file.folders(root)):  # a sweep's links followed
            found.setdefault(file.resolve(), file)
    return [read_run(file) for file in found.values()]


def read_run(file: Path) -> Run:
    """The run whose record is ``file``: a damaged file, or a record of another schema, says why it is left out."""
    try:
        record = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        return Run(file.parent, {"status": DAMAGED}, problem=f"{file} is damaged ({err}): it is no whole record")
    if not isinstance(record, dict):
        return Run(file.parent, {"status": DAMAGED}, problem=f"{file} is damaged: it holds no record")
    status = metrics_file.current_status(record, file.parent)
    other = other_schema(record)
    if other and metrics_file.comparable(status):  # one left out for its status anyway says that instead
        what, fix = other
        return Run(
            file.parent,
            record,
            problem=f"{file} is {what}, so it cannot be paired with other runs; {fix} to compare it",
        )
    return Run(file.parent, {**record, "status": status})


def left_out_notes(runs: Sequence[Run]) -> list[str]:
    """A line for each run a comparison leaves out (a damaged record or one of another schema, bad input, trained or
    validated nothing), saying why."""
    return [
        f"Left out: {run.problem}."
        if run.problem
        else f"Left out: {run.folder} ({run.metrics['status'].replace('_', ' ')}"
        + (f": {str(run.metrics['error']).splitlines()[0][:200].rstrip('.')}" if run.metrics.get("error") else "")
        + ")."
        for run in runs
        if not run.comparable
    ]
