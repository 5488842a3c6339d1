"""Checks on the composed config, so a wrong value fails before training with a clear message."""

from __future__ import annotations

from typing import Any, Callable

import torch
from omegaconf import DictConfig, OmegaConf

from attnexp.errors import AttnexpError

# key, required type, predicate, what is allowed
RULES: list[tuple[str, type, Callable[[Any], bool], str]] = [
    ("seed", int, lambda v: v >= 0, "a non-negative integer"),
    ("trainer.max_epochs", int, lambda v: v > 0 or v == -1, "a positive integer (-1: no limit, use trainer.max_steps)"),
    ("trainer.max_steps", int, lambda v: v > 0 or v == -1, "a positive integer, or -1 for no limit"),
    ("data.batch_size", int, lambda v: v > 0, "a positive integer"),
    ("data.eval_batch_size", int, lambda v: v > 0, "a positive integer"),
    ("data.val_size", int, lambda v: v >= 0, "an integer >= 0"),
    ("data.patch_size", int, lambda v: v > 0, "a positive integer that divides the image size"),
    ("module.optimizer.lr", float, lambda v: v > 0, "a positive number such as 3e-3"),
    ("model.heads", int, lambda v: v > 0, "a positive integer that divides the token width"),
    ("model.eps", float, lambda v: v > 0, "a positive number such as 1e-9 (the euclid score is 1/(distance + eps))"),
    ("model.dropout", float, lambda v: 0 <= v < 1, "a probability in [0, 1)"),
    ("net.depth", int, lambda v: v > 0, "a positive integer"),
    ("net.dim", int, lambda v: v > 0, "a positive integer, or null for the patch width"),
]


def _typed(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if kind is int else isinstance(value, (int, float))


def validate_config(cfg: DictConfig) -> None:
    """Raise :class:`AttnexpError` for the first value that is of the wrong type or out of range."""
    for key, kind, ok, allowed in RULES:
        value = OmegaConf.select(cfg, key, default=None)
        if value is None:
            continue
        if not _typed(value, kind) or not ok(value):
            got = f"'{value}'" if isinstance(value, str) else value
            raise AttnexpError(
                f"{key}={got} is not allowed: {key} must be {allowed}. "
                f"Fix the override, e.g. {key}={_example(key, kind)}, or check the config group file that sets it."
            )
    accelerator = str(OmegaConf.select(cfg, "trainer.accelerator", default="auto"))
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise AttnexpError(
            f"trainer.accelerator={accelerator} asks for a GPU, but PyTorch sees none on this machine "
            f"(torch.cuda.is_available() is False; torch {torch.__version__}). Use trainer=cpu, or "
            "trainer=default to pick whatever accelerator is present."
        )


def _example(key: str, kind: type) -> str:
    return {"module.optimizer.lr": "3e-3", "model.eps": "1e-9", "model.dropout": "0.1"}.get(key, "1" if kind is int else "0.5")
