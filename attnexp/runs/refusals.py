"""Runs refused for bad input leave no run folder: what Hydra and the run made is removed, so comparisons, TensorBoard
and ``resume=true`` never meet it. A sweep keeps one line per refused job in its own folder (``.refused/``), so its
summary can say which jobs were refused and why."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

REFUSED = ".refused"  # in a sweep folder: one file per job refused for bad input
HYDRA_MADE = (".hydra", "train.log")  # what Hydra writes into a run folder before the run starts


def discard(folder: Path, before: set[str], stop_at: Path) -> None:
    """Remove what a refused run made in ``folder``: Hydra's files and every entry not in ``before`` (what the folder
    held when the run started); then the folder and its parents below ``stop_at`` where they are left empty."""
    folder = Path(folder)
    for entry in list(folder.iterdir()) if folder.is_dir() else []:
        if entry.name in HYDRA_MADE or entry.name not in before:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
    stop_at = Path(stop_at).absolute()
    current = folder.absolute()
    while current != stop_at and current.is_relative_to(stop_at) and current.is_dir() and not any(current.iterdir()):
        current.rmdir()
        current = current.parent


def note(sweep_dir: Path, job: str, record: dict[str, Any]) -> None:
    """Keep a refused sweep job's record (``job``: a name of it that is a file name)."""
    folder = Path(sweep_dir) / REFUSED
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{job}.json").write_text(json.dumps(record, sort_keys=True) + "\n")


def forget(sweep_dir: Path, job: str) -> None:
    """A job that runs again (a resumed sweep) is no longer refused until it is again."""
    (Path(sweep_dir) / REFUSED / f"{job}.json").unlink(missing_ok=True)


def refused(sweep_dir: Path) -> list[dict[str, Any]]:
    """The records of a sweep's refused jobs, in job order."""
    files = sorted((Path(sweep_dir) / REFUSED).glob("*.json"))
    return sorted((json.loads(f.read_text()) for f in files), key=lambda r: (r.get("num", 0), r.get("job", "")))
