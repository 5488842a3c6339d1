"""How a run that stopped is recorded: in its metrics.json, or, refused for bad input, by removing what it made (a
sweep keeps a line for the job in its own folder: :mod:`attnexp.runs.refusals`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from attnexp.cli import report
from attnexp.errors import explain, is_bad_input, root_cause
from attnexp.runs import metrics_file, refusals
from attnexp.runs.fingerprint import Settings
from attnexp.runs.folders import FolderTaken, short


@dataclass(frozen=True)
class Start:
    """A run folder as the run found it: what it held, and whether it held a run's record (a folder made for this
    run holds none; one that ``resume=true`` continues, or that holds another run, does)."""

    folder: Path
    entries: frozenset[str]
    fresh: bool
    settings: Settings

    @classmethod
    def now(cls, folder: Path, settings: Settings) -> Start:
        if multirun():
            refusals.forget(sweep_dir(), job_key())
        entries = frozenset(p.name for p in folder.iterdir()) if folder.is_dir() else frozenset()
        return cls(folder, entries, not metrics_file.path(folder).exists(), settings)


def multirun() -> bool:
    return HydraConfig.get().mode == RunMode.MULTIRUN


def sweep_dir() -> Path:
    return Path(HydraConfig.get().sweep.dir)


def job_key() -> str:
    """A sweep job's name as a file name, the same when the sweep is resumed."""
    job = HydraConfig.get().job
    return short(job.override_dirname or f"job{job.num}")


def record(cfg: DictConfig, err: BaseException, start: Start) -> tuple[str, bool]:
    """Make sure the run's metrics.json says how it ended; return that status and whether the run folder is kept.

    A run refused for bad input in a folder made for it leaves no folder (in a sweep, a line in ``.refused/``). A
    record that another process wrote (the run this one was to resume, a run already in the folder) is left as it
    was: nothing of this run is in it."""
    found = metrics_file.read(start.folder)
    if isinstance(err, (KeyboardInterrupt, SystemExit)):
        status, error = metrics_file.INTERRUPTED, report.INTERRUPTED
    else:
        status, error = (metrics_file.BAD_INPUT if is_bad_input(err) else metrics_file.FAILED), explain(err)
    if found.get("status") == metrics_file.DIVERGED:
        status = metrics_file.DIVERGED
    ours = found.get("pid", os.getpid()) == os.getpid() and not isinstance(root_cause(err), FolderTaken)
    if status == metrics_file.BAD_INPUT and start.fresh and ours:
        if multirun():
            job = HydraConfig.get().job
            folder, sweep = start.folder.absolute(), sweep_dir().absolute()
            folder = folder.relative_to(sweep) if folder.is_relative_to(sweep) else folder
            refusals.note(sweep_dir(), job_key(), {"num": job.num, "job": report.job_name(), "folder": str(folder),
                                                   "status": status, "error": error})
        refusals.discard(start.folder, set(start.entries), sweep_dir() if multirun() else Path(cfg.paths.log_dir) / "runs")
        return status, False
    if ours:
        header = {**metrics_file.header(start.settings.choices, cfg.get("seed")), **start.settings.record()}
        metrics_file.write(start.folder, {**header, **found, "status": status, "error": error})
    return status, True
