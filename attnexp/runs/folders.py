"""Run folders: where a run or sweep writes (a new folder, or with ``resume=true`` the previous one: the entrypoint
finds it before Hydra makes one), and how sweep jobs and single runs are named (pure resolvers of the Hydra config)."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from attnexp.errors import AttnexpError
from attnexp.runs import metrics_file
from attnexp.runs.resume import comparable_overrides, matching_run


def check_writable(root: str | Path) -> None:
    """Create the output root if needed and write a file there; :class:`AttnexpError` if that fails."""
    path = Path(root).absolute()
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError as err:
        raise AttnexpError(
            f"Cannot write run output under {path} ({err.strerror or err}). Choose another output root with "
            "paths.log_dir=/a/writable/folder, or fix that folder's permissions. Nothing was written."
        ) from None


def resumed_folder(cfg: DictConfig, overrides: list[str], sweep: bool) -> str | None:
    """The folder ``resume=true`` continues, if any: for a run, the newest run folder under ``paths.log_dir`` with the
    settings and seed of ``cfg`` (a composed config; :func:`attnexp.runs.resume.matching_run`); for a sweep, the
    newest sweep folder (``multirun.yaml``) made by the same command-line ``overrides``, those that cannot change the
    method aside."""
    root = Path(cfg.paths.log_dir) / ("multirun" if sweep else "runs")
    if not sweep:
        return matching_run(root, cfg, overrides)
    wanted = comparable_overrides(overrides)
    candidates = [
        (path.stat().st_mtime, str(path.parent))
        for path in root.rglob("multirun.yaml")
        if comparable_overrides(OmegaConf.load(path).hydra.overrides.task) == wanted
    ]
    return max(candidates)[1] if candidates else None


def job_dirname(overrides: str, num: int) -> str:
    """Resolver for a sweep job's folder: its overrides that vary in the sweep (``hydra.job.override_dirname``, the
    fixed ones excluded by :class:`attnexp.cli.sweep.SweepCallback`), one folder level each, the mixer first:
    ``model=euclid/seed=1``. ``/`` inside a value becomes ``_``; where the name would be too long for file names,
    ``job<num>_`` and a hash of it (the same for a resumed sweep); ``job<num>`` when nothing varies."""
    items = name_items(overrides)
    name = "/".join(items)
    if not name:
        return f"job{num}"
    if max(len(item.encode()) for item in items) <= MAX_NAME:
        return name
    return f"job{num}_{short(name)}"


def run_dirname(overrides: str) -> str:
    """Resolver for the end of a single run's folder name, after ``<time>_<mixer>_<data>``: the command line's other
    overrides (``hydra.job.override_dirname``), so that runs differing by ``seed=1`` differ by name in TensorBoard:
    ``_seed=1,trainer.max_epochs=2``; a hash of them where they would make the name too long; nothing without any."""
    items = [i for i in name_items(overrides) if i.lstrip("+~").split("=")[0] not in ("model", "data")]
    name = ",".join(items)
    return "" if not name else f"_{name}" if len(name.encode()) <= MAX_NAME else f"_{short(name)}"


MAX_NAME = 200  # bytes of a folder name made of overrides; file systems allow 255


def name_items(overrides: str) -> list[str]:
    """The ``key=value`` items of an override dirname, ``/`` in values as ``_`` and without the quotes a path needed
    on the command line (a folder name then reads back as one value), the mixer first."""
    items = [item.replace("/", "_").replace("'", "").replace('"', "") for item in str(overrides).split(",") if item]
    return sorted(items, key=lambda item: (not item.lstrip("+~").startswith("model="), item))


def short(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()[:12]


def saved_hydra(output_dir: str | Path) -> Any:
    """Hydra's own config (its ``hydra`` node) that Hydra saved in a finished run's folder, or None."""
    saved = Path(output_dir) / ".hydra" / "hydra.yaml"
    return OmegaConf.load(saved).hydra if saved.exists() else None


class FolderTaken(AttnexpError):
    """A new run's folder already holds another run's record."""


def check_new_folder(output_dir: str | Path) -> None:
    """A new run needs a folder of its own: one that holds a run's record (a folder named again with hydra.run.dir or
    hydra.sweep.dir, or two search trials with the same values) would get two runs' curves and checkpoints."""
    found = metrics_file.read(output_dir)
    if found:
        raise FolderTaken(
            f"{output_dir} already holds a run (metrics.json status {found.get('status')}); a second run there would "
            "mix its curves, checkpoints and record with it. Add resume=true to continue that run, or choose "
            "another folder (hydra.run.dir=..., hydra.sweep.dir=...)."
        )


def resume_point(output_dir: str | Path) -> tuple[str, str | None]:
    """What to do in a resumed run folder: ``("done", None)``, ``("continue", ckpt)`` or ``("fresh", None)``; a run
    whose process still runs is refused (two processes would write one folder)."""
    output_dir = Path(output_dir)
    record = metrics_file.read(output_dir)
    status = metrics_file.current_status(record, output_dir) if record else None
    if status == metrics_file.OK:
        return "done", None
    if status in (metrics_file.RUNNING, metrics_file.TRAINED):
        raise AttnexpError(
            f"{output_dir} is still being trained by process {record.get('pid')} on this machine (metrics.json status "
            f"{status}). Wait for it to end, or stop it (Ctrl-C or kill {record.get('pid')}), then resume."
        )
    last = output_dir / "checkpoints" / "last.ckpt"
    return ("continue", str(last)) if last.exists() else ("fresh", None)
