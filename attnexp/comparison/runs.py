"""The runs under some folders, each named by what distinguishes its configuration from the others' (see
:mod:`attnexp.comparison.naming`), with its record (``metrics.json``) as it stands now."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from attnexp.runs import metrics_file

ABSENT = "absent"  # a setting's value in a configuration whose config has no such key: not part of its name


@dataclass
class Run:
    """One run folder's record (its status as it stands now: see :func:`metrics_file.current_status`), its
    command-line overrides and the settings that name its configuration."""

    folder: Path
    settings: dict[str, str]  # key -> value of what tells the configurations apart (seed included)
    metrics: dict
    overrides: list[str] = field(default_factory=list)  # as typed on the command line
    unlisted: frozenset[str] = frozenset()  # settings no override set (a config file or a default changed): in brackets
    version: str = ""  # "source changed: 3f2a…" where its mixer's source differs from the first version's

    @property
    def seed(self) -> str:
        return self.settings.get("seed", str(self.metrics.get("seed")))

    @property
    def ok(self) -> bool:
        return self.metrics.get("status") == metrics_file.OK

    @property
    def comparable(self) -> bool:
        return metrics_file.comparable(str(self.metrics.get("status")))

    @property
    def recorded(self) -> bool:
        """Whether the record holds the run's settings (records of older versions name their overrides only)."""
        return isinstance(self.metrics.get("config"), dict)

    def config(self, leave_out: Sequence[str] = ()) -> str:
        """The configuration's name: its settings, the mixer first, seed (and ``leave_out``) aside; settings that no
        override set, and a changed source, in brackets: ``model=diff (lambda_init=0.2)``."""
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
    """Every run folder (holding metrics.json) under ``paths``, unnamed."""
    found = []
    for root in paths:
        for folder in metrics_file.folders(root):
            overrides_file = folder / ".hydra" / "overrides.yaml"
            overrides = (
                [str(o) for o in yaml.safe_load(overrides_file.read_text()) or []] if overrides_file.exists() else []
            )
            record = metrics_file.read(folder)
            found.append(Run(folder, {}, {**record, "status": metrics_file.current_status(record, folder)}, overrides))
    return found


def left_out_notes(runs: Sequence[Run]) -> list[str]:
    """A line for each run a comparison leaves out (bad input, trained or validated nothing), saying why."""
    return [
        f"Left out: {run.folder} ({run.metrics['status'].replace('_', ' ')}"
        + (f": {str(run.metrics['error']).splitlines()[0][:200].rstrip('.')}" if run.metrics.get("error") else "")
        + ")."
        for run in runs
        if not run.comparable
    ]
