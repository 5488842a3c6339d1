"""Checkpoints: read one safely, saying in one paragraph what is wrong with a damaged one; check that a file fits the
model before training from it; checkpoint files named by epoch counted from 1."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from torch import Tensor, nn

from attnexp.errors import AttnexpError

log = logging.getLogger("attnexp")


class DamagedCheckpoint(AttnexpError):
    """A checkpoint file that exists but cannot be read as a Lightning checkpoint."""


def read_checkpoint(path: str | Path, what: str = "") -> dict[str, Any]:
    """The checkpoint at ``path`` (``what``: how the user named it), loaded as tensors and plain values only
    (``weights_only``: a file can run no code); :class:`AttnexpError` for a missing file, :class:`DamagedCheckpoint`
    for one cut short or that is no Lightning checkpoint."""
    path = Path(path)
    what = what or f"The checkpoint {path}"
    if not os.path.isfile(path):  # False, not an OSError, for a name longer than the file system takes
        raise AttnexpError(
            f"{what} does not exist. Give the path of a .ckpt file, e.g. "
            "outputs/runs/<date>/<run>/checkpoints/last.ckpt, or use resume=true to continue the previous run."
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise DamagedCheckpoint(f"{what} is damaged: {damage(err, path)}") from err
    if not isinstance(state, dict) or "state_dict" not in state:
        raise DamagedCheckpoint(
            f"{what} is damaged: it holds no model weights (no state_dict); no training run here wrote it."
        )
    return state


def damage(err: BaseException, path: Path) -> str:
    """What is wrong with a file torch cannot load, without torch's advice to load it unsafely."""
    short = isinstance(err, (OSError, EOFError)) or "zip archive" in str(err) or "central directory" in str(err)
    what = "it ends early (cut short by a full disk, a crash while saving, or an unfinished copy)" if short else ""
    what = what or "its contents are not a checkpoint's (written by another program, or overwritten)"
    return f"{what}; {path.stat().st_size:,} bytes ({type(err).__name__})."


def intact_checkpoints(folder: Path, besides: Path) -> list[Path]:
    """The run's other epoch checkpoints (best first, then last.ckpt) that load, newest first among the best."""
    best = sorted(
        (p for p in folder.glob("*.ckpt") if p.name not in ("last.ckpt", "interrupted.ckpt")),
        key=lambda p: p.stat().st_mtime,
    )
    found = []
    for candidate in [*reversed(best), folder / "last.ckpt"]:
        if candidate.is_file() and candidate.resolve() != besides.resolve():
            try:
                read_checkpoint(candidate)
            except DamagedCheckpoint:
                continue
            found.append(candidate)
    return found


def intact_instead(err: DamagedCheckpoint, path: Path, fall_back: bool, fix: str = "") -> Path:
    """The run's newest intact checkpoint in place of the damaged ``path`` where ``fall_back``; else ``err`` naming the
    run's intact checkpoints, or saying there is none (``fix``: what to do then)."""
    intact = intact_checkpoints(path.parent, besides=path)
    if fall_back and intact:
        return intact[0]
    named = f"Intact checkpoints of that run: {', '.join(map(str, intact))}" if intact else "No other checkpoint of"
    raise DamagedCheckpoint(f"{err} {named}{'' if intact else ' that run is intact'}{fix}.") from err


def checkpoint_to_train_from(path: str | Path, model: nn.Module, resumed: bool) -> str:
    """``path`` if it loads and fits ``model``. Resuming, a damaged ``last.ckpt`` gives way to the run's newest intact
    epoch checkpoint, with a warning (the epochs after it are trained again), and the run's damaged checkpoints are
    removed (:func:`remove_damaged`); else a damaged file is an error."""
    path = Path(path)
    what = f"This run's {path.parent.name}/{path.name}" if resumed else f"ckpt_path={path}"
    try:
        check_checkpoint(path, model, what)
    except DamagedCheckpoint as err:
        fix = (
            f": to start again, delete the run's folder {path.parent.parent} and run the same command"
            if resumed
            else ""
        )
        intact = intact_instead(err, path, resumed, fix)
        check_checkpoint(intact, model, f"This run's checkpoints/{intact.name}")
        log.warning(
            f"{err} Continuing from {intact.name} instead, the newest intact checkpoint of the run: the epochs after "
            "it are trained again (their curves appear twice in TensorBoard)."
        )
        path = intact
    if resumed:
        remove_damaged(path.parent)
    return str(path)


def remove_damaged(folder: Path) -> None:
    """Remove the checkpoints in a resumed run's ``folder`` that cannot be read (cut short by a full disk, say): they
    continue nothing, and the run writes whole ones; a warning names them."""
    damaged = []
    for ckpt in sorted(folder.glob("*.ckpt")):
        try:
            read_checkpoint(ckpt)
        except DamagedCheckpoint:
            damaged.append(ckpt)
    for ckpt in damaged:
        ckpt.unlink(missing_ok=True)
    if damaged:
        log.warning(f"Removed the run's damaged checkpoints: {', '.join(p.name for p in damaged)}.")


def check_checkpoint(path: str | Path, model: nn.Module, what: str) -> None:
    """Raise :class:`AttnexpError` if ``path`` (``what``: how the user named it) is missing, unreadable, or made for
    another model."""
    check_fits(read_checkpoint(path, what)["state_dict"], model, what)


def check_fits(
    state: dict[str, Tensor],
    model: nn.Module,
    what: str,
    fix: str = "Use the same model, net and data settings as the run that wrote it (its metrics.json lists them)",
) -> None:
    """Raise :class:`AttnexpError` naming the keys that differ if the weights ``state`` (``what``: whose) were made
    for another model than ``model``; ``fix``: what to do then."""
    expected = model.state_dict()
    shapes = [
        f"{k} {tuple(state[k].shape)} vs {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    found = {"missing": sorted(set(expected) - set(state)), "unexpected": sorted(set(state) - set(expected))}
    found["shape checkpoint vs model"] = shapes
    details = "; ".join(
        f"{k}: {', '.join(items[:4])}{' ...' * (len(items) > 4)}" for k, items in found.items() if items
    )
    if details:
        raise AttnexpError(f"{what} was written by a different mixer or network ({details}). {fix}.")


class BestCheckpoint(ModelCheckpoint):
    """Lightning's ``ModelCheckpoint`` (the earliest of equally good epochs is the best, as Lightning keeps it), with
    ``{epoch}`` in file names counted from 1, as the curves, the progress bar and metrics.json count (``epoch003``:
    after the third epoch)."""

    def format_checkpoint_name(
        self, metrics: dict[str, Tensor], filename: str | None = None, ver: int | None = None, prefix: str | None = None
    ) -> str:
        if "epoch" in metrics:
            metrics = {**metrics, "epoch": metrics["epoch"] + 1}
        return super().format_checkpoint_name(metrics, filename, ver, prefix)
