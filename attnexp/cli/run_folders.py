"""Where a run or sweep writes: a new folder, or with ``resume=true`` the previous one."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from attnexp.cli import record


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
    fixed ones excluded by :class:`attnexp.cli.sweep.SweepCallback`), one folder level each, the variant first:
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


def resume_point(output_dir: str | Path) -> tuple[str, str | None]:
    """What to do in a resumed run folder: ``("done", None)``, ``("continue", ckpt)`` or ``("fresh", None)``."""
    output_dir = Path(output_dir)
    if record.read(output_dir).get("status") == record.OK:
        return "done", None
    last = output_dir / "checkpoints" / "last.ckpt"
    return ("continue", str(last)) if last.exists() else ("fresh", None)
