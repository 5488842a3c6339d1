"""Checkpoints: check that a file fits the model before training from it; keep the best epoch, later ones winning ties."""

from __future__ import annotations

from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from torch import Tensor, nn

from attnexp.errors import AttnexpError


def check_checkpoint(path: str | Path, model: nn.Module) -> None:
    """Raise :class:`AttnexpError` if ``path`` is missing, unreadable, or made for another model."""
    path = Path(path)
    if not path.is_file():
        raise AttnexpError(
            f"ckpt_path={path} does not exist. Give the path of a .ckpt file, e.g. "
            "outputs/runs/<date>/<run>/checkpoints/last.ckpt, or use resume=true to continue the previous run."
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
    except Exception as err:
        raise AttnexpError(f"ckpt_path={path} is not a readable Lightning checkpoint ({type(err).__name__}: {err}).") from err
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shapes = [f"{k} {tuple(state[k].shape)} vs {tuple(expected[k].shape)}" for k in expected if k in state and state[k].shape != expected[k].shape]
    if missing or unexpected or shapes:
        details = "; ".join(
            f"{label}: {', '.join(items[:4])}{' ...' if len(items) > 4 else ''}"
            for label, items in (("missing", missing), ("unexpected", unexpected), ("shape checkpoint vs model", shapes))
            if items
        )
        raise AttnexpError(
            f"ckpt_path={path} was written by a different mixer or network ({details}). Use the same model, net and "
            "data settings as the run that wrote it (its .hydra/config.yaml lists them)."
        )


class BestCheckpoint(ModelCheckpoint):
    """Lightning's ``ModelCheckpoint``, except that an epoch that ties the best value so far replaces it:
    the later of equally good epochs is the one tested (Lightning keeps the earlier)."""

    def check_monitor_top_k(self, trainer: pl.Trainer, current: Tensor | None = None) -> bool:
        if current is None or self.save_top_k == -1 or len(self.best_k_models) < self.save_top_k:
            return super().check_monitor_top_k(trainer, current)
        at_least_as_good = torch.le if self.mode == "min" else torch.ge
        better = bool(at_least_as_good(current, self.best_k_models[self.kth_best_model_path]))
        return trainer.strategy.reduce_boolean_decision(better)
