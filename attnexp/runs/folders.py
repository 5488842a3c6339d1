"""Where a run writes: ``<log_dir>/runs/<mixer>_<data>_<identity>/seed=<seed>``, from its identity and seed, so the
same settings, code and data find the same folder. :func:`run_folder` is the resolver of ``hydra.run.dir`` and of a
sweep job's ``hydra.sweep.subdir``; the pre-flight stage asks the same function first."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from attnexp.errors import AttnexpError, shown
from attnexp.runs import data as data_of_run
from attnexp.runs import identity, lock, metrics_file
from attnexp.runs.settings import config_record, method, targets

SHOWN = 8  # hex digits of the identity in a folder name
FINISHED = (  # a rerun computes the same again
    metrics_file.OK,
    metrics_file.UNTRAINED,
    metrics_file.UNVALIDATED,
    metrics_file.DIVERGED,
    metrics_file.INVALID,
)
# What one command computed of its runs' identities, by what each read: the pre-flight stage, Hydra's resolver and the
# record ask for the same run's
KNOWN: dict[str, dict[str, Any]] = {}


def what_ran(cfg: DictConfig, choices: dict[str, Any], searchpath: Sequence[str] = ()) -> dict[str, Any]:
    """The identity of the run ``cfg`` composes (Hydra's node aside; ``choices``: its config-group options;
    ``searchpath``: ``hydra.searchpath``, where a user's configs and code may lie), with the code and data it stands
    for: ``{"identity", "code", "dataset"}``. The user's code is read from its files, nothing imported."""

    config = config_record(cfg)
    folders = identity.user_folders(searchpath, Path.cwd())
    read = [method(config), config.get("data"), choices, [str(f) for f in folders]]  # what the identity reads
    text = json.dumps(read, sort_keys=True, default=str)
    if text not in KNOWN:
        data = data_of_run.checked(cfg)
        data.prepare_data()  # a download, or a copy from a system package, first: the files are then there
        code = identity.code([target for _, target in targets(config)], folders)
        dataset = identity.dataset(getattr(data, "files", dict)())
        key = identity.key(choices, config, code["id"], dataset["id"])
        KNOWN[text] = {"identity": key, "code": code, "dataset": dataset}
    return KNOWN[text]


def forget() -> None:
    """Forget the identities computed: a command computes its own (a file may have changed since the last)."""
    KNOWN.clear()


def choices_of(hydra: Any) -> dict[str, str]:
    """The config-group options Hydra chose (``hydra``: Hydra's node; its own groups left out)."""
    found = OmegaConf.to_container(OmegaConf.select(hydra, "runtime.choices", default=None) or OmegaConf.create())
    assert isinstance(found, dict)
    return {str(g): "null" if o is None else str(o) for g, o in found.items() if not str(g).startswith("hydra")}


def run_folder(*, _root_: DictConfig) -> str:
    """Resolver ``attnexp.run_folder``: the folder of the run the config composes."""
    cfg = OmegaConf.masked_copy(_root_, [str(k) for k in _root_ if k != "hydra"])
    choices = choices_of(_root_.hydra)
    short = what_ran(cfg, choices, list(_root_.hydra.searchpath))["identity"][:SHOWN]
    name = f"{choices.get('model')}_{choices.get('data')}_{short}".replace("/", "_")
    return str(Path(str(cfg.paths.log_dir)).absolute() / "runs" / name / f"seed={cfg.seed}")


def check_writable(folder: str | Path, key: str = "paths.log_dir") -> None:
    """``folder`` can be made and written, found without making it: its nearest folder that exists takes a file (an
    unnamed one, gone when closed); :class:`AttnexpError` naming ``key`` (the setting that places it) if not."""
    path = Path(folder).absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    try:
        if not existing.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as err:
        raise AttnexpError(
            f"Cannot write run output under {shown(path)} ({shown(existing)}: {err.strerror or err}). Choose another "
            f"output root with paths.log_dir=/a/writable/folder{'' if key == 'paths.log_dir' else f' (or {key}=...)'}"
            ", or make that folder writable. Nothing was run or written."
        ) from None


def checkpoint_dir(cfg: DictConfig, folder: str | Path) -> Path:
    """Where a run's checkpoints go: the checkpoint callback's own folder (``callbacks.checkpoint.dirpath``, which may
    lie elsewhere), else ``checkpoints/`` in the run folder (the default, which names the run's folder through Hydra's
    runtime)."""
    try:
        dirpath = OmegaConf.select(cfg, "callbacks.checkpoint.dirpath", default=None)
    except Exception:  # the default's interpolation of Hydra's output folder, before Hydra runs
        dirpath = None
    return Path(dirpath).absolute() if dirpath else Path(folder).absolute() / "checkpoints"


def checkpoints_of(folder: str | Path, record: dict[str, Any], default: Path | None = None) -> Path:
    """The folder of a run's checkpoints as its record names it (within the run folder, so a moved run keeps it; or
    elsewhere), else ``default``, else ``checkpoints/`` of the run folder."""
    return Path(folder).absolute() / (record.get("checkpoints") or default or "checkpoints")


def state(folder: str | Path, checkpoints: Path | None = None) -> tuple[str, dict[str, Any]]:
    """What a run folder holds: ``new``, ``finished`` (:data:`FINISHED`), ``running`` (its process holds the folder's
    lock, with or without a first record yet), ``unfinished`` (failed, interrupted, abandoned, with a checkpoint to
    continue from), ``restart`` (stopped before its first checkpoint: nothing to continue) or ``orphaned``
    (checkpoints, but no record), with its record. The checkpoints are in the folder its record names (else
    ``checkpoints``, else ``checkpoints/`` of the folder)."""
    record = metrics_file.read(folder)
    checkpoints_found = any(checkpoints_of(folder, record, checkpoints).glob("*.ckpt"))
    if not record:  # a process that holds the lock may not have written its first record yet
        return ("running" if lock.holder(folder) is not None else "orphaned" if checkpoints_found else "new"), {}
    status = metrics_file.current_status(record, folder)
    if status in FINISHED:
        return "finished", record
    if status in (metrics_file.RUNNING, metrics_file.TRAINED):
        return "running", record
    return ("unfinished" if checkpoints_found else "restart"), record


def refusal(folder: str | Path, kind: str, record: dict[str, Any], resume: bool) -> str | None:
    """Why a start of the run of ``folder`` (what :func:`state` found) is refused, or None: a run still training, an
    unfinished one without ``resume=true``, checkpoints without a record (a fresh start would mix with them)."""
    if kind == "running":
        pid = lock.holder(folder) or record.get("pid")
        return f"{shown(folder)} is being trained by process {pid} (wait for it to end, or stop it)"
    if kind == "unfinished" and not resume:
        status = metrics_file.current_status(record, folder)
        return (
            f"{shown(folder)} holds an unfinished run of these settings (status {status}): add resume=true to "
            "continue it from its last checkpoint, or delete the folder to start again"
        )
    if kind == "orphaned" and not resume:
        return (
            f"{shown(folder)} holds checkpoints but no record (metrics.json), so a fresh start would mix with "
            "them: add resume=true to continue from its last checkpoint (with a new record), or delete the folder "
            f"(rm -r {shown(folder)}) to start again"
        )
    return None
