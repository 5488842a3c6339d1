"""Run folders: where a run or sweep writes (a new folder, or with ``resume=true`` the previous one), and the
finished runs under some folders, named by the overrides that differ between them."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from attnexp.runs import metrics_file


def _comparable(overrides: Any) -> list[str]:
    return sorted(o for o in overrides if not str(o).lstrip("+~").startswith("resume="))


def check_writable(root: str) -> None:
    """Create the output root if needed and write a file there; exit with a clear message if that fails.

    This runs while Hydra resolves the run folder, before it creates anything,
    where an exception would reach the user as a traceback: hence the exit.
    """
    path = Path(root).absolute()
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        logging.getLogger("attnexp").error(
            f"Cannot write run output under {path} ({err.strerror or err}). Choose another output root with "
            "paths.log_dir=/a/writable/folder, or fix that folder's permissions. Nothing was written."
        )
        sys.exit(2)


def output_dir(resume: Any, root: str, new_dir: str, kind: str, *, _root_: Any) -> str:
    """Resolver for ``hydra.run.dir`` / ``hydra.sweep.dir``.

    Checks that ``root`` is writable. Without ``resume`` it returns ``new_dir``. With it, the newest folder under
    ``root`` made by the same command-line overrides (``resume`` aside): a run
    folder (``.hydra/overrides.yaml``) or a sweep folder (``multirun.yaml``).
    A sweep resolves its folder once, at its start (:class:`attnexp.cli.sweep.SweepCallback`).
    """
    check_writable(root)
    if str(resume).lower() not in ("true", "1"):
        return new_dir
    wanted = _comparable(_root_.hydra.overrides.task)
    pattern = "multirun.yaml" if kind == "sweep" else "overrides.yaml"
    candidates = []
    for path in Path(root).rglob(pattern):
        if kind == "run" and path.parent.name != ".hydra":
            continue
        loaded = OmegaConf.load(path)
        overrides = loaded.hydra.overrides.task if kind == "sweep" else loaded
        if _comparable(overrides) == wanted:
            folder = path.parent if kind == "sweep" else path.parent.parent
            candidates.append((path.stat().st_mtime, str(folder)))
    return max(candidates)[1] if candidates else new_dir


def job_dirname(overrides: str, num: int) -> str:
    """Resolver for a sweep job's folder: its overrides that vary in the sweep (``hydra.job.override_dirname``, the
    fixed ones excluded by :class:`attnexp.cli.sweep.SweepCallback`), one folder level each, the mixer first:
    ``model=euclid/seed=1``. ``/`` inside a value becomes ``_``; where the name would be too long for file names,
    ``job<num>_`` and a hash of it (the same for a resumed sweep); ``job<num>`` when nothing varies."""
    items = [item.replace("/", "_") for item in str(overrides).split(",") if item]
    items.sort(key=lambda item: (not item.lstrip("+~").startswith("model="), item))
    name = "/".join(items)
    if not name:
        return f"job{num}"
    if max(len(item.encode()) for item in items) <= 200:
        return name
    return f"job{num}_{hashlib.sha1(name.encode()).hexdigest()[:12]}"


def hydra_files(output_dir: str | Path) -> tuple[DictConfig | None, DictConfig | None]:
    """The composed config and Hydra's own config (its ``hydra`` node) that Hydra saved in a run folder, or None."""
    saved = Path(output_dir) / ".hydra"
    cfg = OmegaConf.load(saved / "config.yaml") if (saved / "config.yaml").exists() else None
    hydra = OmegaConf.load(saved / "hydra.yaml").hydra if (saved / "hydra.yaml").exists() else None
    return cfg, hydra


def resume_point(output_dir: str | Path) -> tuple[str, str | None]:
    """What to do in a resumed run folder: ``("done", None)``, ``("continue", ckpt)`` or ``("fresh", None)``."""
    output_dir = Path(output_dir)
    if metrics_file.read(output_dir).get("status") == metrics_file.OK:
        return "done", None
    last = output_dir / "checkpoints" / "last.ckpt"
    return ("continue", str(last)) if last.exists() else ("fresh", None)


@dataclass
class Run:
    """One run folder's record and the settings that name it."""

    folder: Path
    settings: dict[str, str]  # key -> value of the overrides that vary between the runs found (seed included)
    metrics: dict

    @property
    def seed(self) -> str:
        return self.settings.get("seed", str(self.metrics.get("seed")))

    @property
    def ok(self) -> bool:
        return self.metrics.get("status") == metrics_file.OK

    def config(self, leave_out: Sequence[str] = ()) -> str:
        """The configuration's name: its varying settings, the mixer first, seed (and ``leave_out``) aside."""
        keys = sorted((k for k in self.settings if k not in ("seed", *leave_out)), key=lambda k: (k != "model", k))
        return ",".join(f"{k}={self.settings[k]}" for k in keys) or "all runs"


def find_runs(paths: Sequence[str | Path]) -> list[Run]:
    """Every run folder (holding metrics.json) under ``paths``, named by the overrides that differ between them."""
    found = []
    for root in paths:
        for folder in sorted(p.parent for p in Path(root).rglob(metrics_file.FILE)):
            overrides_file = folder / ".hydra" / "overrides.yaml"
            overrides = yaml.safe_load(overrides_file.read_text()) if overrides_file.exists() else []
            metrics = metrics_file.read(folder)
            settings = {"model": metrics_file.mixer(metrics), "data": str(metrics.get("data"))}
            settings.update(o.lstrip("+~").split("=", 1) for o in overrides or [] if "=" in o)
            found.append((folder, settings, metrics))
    keys = sorted({k for _, s, _ in found for k in s} - {"resume"})
    varying = [k for k in keys if len({s.get(k) for _, s, _ in found}) > 1 and k != "seed"] or ["model"]
    return [Run(folder, {k: s[k] for k in [*varying, "seed"] if k in s}, m) for folder, s, m in found]
