"""A run's record (``metrics.json``) and its one writer, :class:`RunRecord`: self-contained, so comparisons,
``resume=true`` and ``attnexp-predict`` read it alone. It opens with what the run is (schema, identity, code, data,
settings, command line, start, resumes); :class:`attnexp.training.callbacks.record.RecordKeeper` adds the rest."""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from attnexp.runs import folders, identity, metrics_file
from attnexp.runs.settings import NOT_METHOD, config_record


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


@dataclass
class RunRecord:
    """The record of the run in ``folder`` (``fields``: what it holds); ``resumed``: whether it continues a run the
    folder held."""

    folder: Path
    fields: dict[str, Any] = field(default_factory=dict)
    resumed: bool = False

    @classmethod
    def open(
        cls, folder: str | Path, cfg: DictConfig, choices: dict[str, str], overrides: list[str], searchpath: list[str]
    ) -> RunRecord:
        """The record of the run ``cfg`` composes (``choices``: its config-group options, ``overrides``: its command
        line, ``searchpath``: Hydra's, where the user's code may lie), or the folder's record of an unfinished run of
        the same identity, which this start continues. Nothing is written yet."""
        folder, command = Path(folder), ["attnexp", *overrides]
        what = folders.what_ran(cfg, choices, searchpath)
        found = metrics_file.read(folder)
        process = {"host": socket.gethostname(), "pid": os.getpid(), "python": sys.executable, "cwd": os.getcwd()}
        resume = {"at": now(), "command": command, "from": None}
        if found.get("identity") == what["identity"] and found.get("schema") == identity.SCHEMA:
            return cls(folder, {**found, **process, "resumed": [*found.get("resumed", []), resume]}, resumed=True)
        config = config_record(cfg)
        named = {"mixer": choices.get("model"), **{g: choices.get(g) for g in ("data", "net", "task")}}
        fields = {"schema": identity.SCHEMA, **named, "seed": config.get("seed"), **what, "command": command}
        fields |= {"overrides": overrides, "started": now(), "resumed": [], "choices": choices, "config": config}
        where = folders.checkpoint_dir(cfg, folder)  # the checkpoint callback's folder: the run's own, or elsewhere
        inside = where.is_relative_to(folder.absolute())
        fields["checkpoints"] = str(where.relative_to(folder.absolute()) if inside else where)
        orphaned = not found and bool(cfg.get("resume")) and any(where.glob("*.ckpt"))
        if orphaned:  # checkpoints whose record is gone: continued under a new record that says so
            fields["resumed"] = [resume]
        return cls(folder, {**fields, "leaves_out": list(NOT_METHOD), **process}, resumed=orphaned)

    def write(self, **fields: Any) -> None:
        """Add ``fields`` and write the whole record (atomically); a new status is added to ``history``."""
        status = fields.get("status")
        if status and status != self.fields.get("status"):
            fields["history"] = [*self.fields.get("history", []), [now(), status]]
        self.fields.update(fields)
        metrics_file.write(self.folder, self.fields)

    def ours(self) -> bool:
        """Whether the folder's record (if any) is this process's."""
        return metrics_file.read(self.folder).get("pid", os.getpid()) == os.getpid()
