"""A run's record (``metrics.json``, :mod:`attnexp.runs.metrics_file`) and its one writer, :class:`RunRecord`.

The entrypoint opens the record with what the run was asked to run (its settings); the training callback
(:class:`attnexp.callbacks.record.RecordKeeper`) adds what ran, the metrics and the timings as the run goes; and a run
that stops says how through the same object. Reads no torch.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnexp.runs import metrics_file
from attnexp.runs.fingerprint import Settings


@dataclass
class RunRecord:
    """The record of the run in ``folder``: ``fields``, what it holds, and what the folder held when the run started
    (``held``: its entries; ``fresh``: whether it held no record, i.e. it was made for this run)."""

    folder: Path
    settings: Settings
    fields: dict[str, Any] = field(default_factory=dict)
    held: frozenset[str] = frozenset()
    fresh: bool = True

    @classmethod
    def open(cls, folder: str | Path, settings: Settings) -> RunRecord:
        """The record a run in ``folder`` starts: the config-group options (``model`` as ``mixer``), the seed, the host
        and process that write it, and the settings with their fingerprint. Nothing is written yet."""
        folder, choices = Path(folder), settings.choices
        fields = {
            "mixer": choices.get("model"),
            "data": choices.get("data"),
            "net": choices.get("net"),
            "task": choices.get("task"),
            "seed": settings.config.get("seed"),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            **settings.record(),
        }
        held = frozenset(p.name for p in folder.iterdir()) if folder.is_dir() else frozenset()
        return cls(folder, settings, fields, held, not metrics_file.path(folder).exists())

    def write(self, **fields: Any) -> None:
        """Add ``fields`` and write the whole record (atomically)."""
        self.fields.update(fields)
        metrics_file.write(self.folder, self.fields)

    def found(self) -> dict[str, Any]:
        """The record in the folder now: this run's, another process's, or none."""
        return metrics_file.read(self.folder)

    def ours(self) -> bool:
        """Whether the folder's record (if any) is this process's: a record another process wrote (the run a resume
        continues, a run already in the folder) holds nothing of this run."""
        return self.found().get("pid", os.getpid()) == os.getpid()
