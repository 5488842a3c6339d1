"""Checkpoint files: check that one fits the model before training from it."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

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
            f"ckpt_path={path} was written by a different model or variant ({details}). Use the same model, net and "
            "data settings as the run that wrote it (its .hydra/config.yaml lists them)."
        )
