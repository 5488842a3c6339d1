"""Checks on the composed config, so a wrong value fails before training with a clear message."""

from __future__ import annotations

import inspect
from typing import Any, Callable

import torch
from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from attnexp.errors import AttnexpError

# key, required type, predicate, what is allowed
RULES: list[tuple[str, type, Callable[[Any], bool], str]] = [
    ("seed", int, lambda v: v >= 0, "a non-negative integer"),
    ("trainer.max_epochs", int, lambda v: v > 0 or v == -1, "a positive integer (-1: no limit, use trainer.max_steps)"),
    ("trainer.max_steps", int, lambda v: v > 0 or v == -1, "a positive integer, or -1 for no limit"),
    ("data.batch_size", int, lambda v: v > 0, "a positive integer"),
    ("data.eval_batch_size", int, lambda v: v > 0, "a positive integer"),
    ("data.val_size", int, lambda v: v > 0, "a positive integer (validation picks the best checkpoint)"),
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
    check_optimizer_arguments(cfg)
    check_schedule_length(cfg)
    accelerator = str(OmegaConf.select(cfg, "trainer.accelerator", default="auto"))
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise AttnexpError(
            f"trainer.accelerator={accelerator} asks for a GPU, but PyTorch sees none on this machine "
            f"(torch.cuda.is_available() is False; torch {torch.__version__}). Use trainer=cpu, or "
            "trainer=default to pick whatever accelerator is present."
        )


def unaccepted(target: str, keys: Any) -> list[str]:
    """The ``keys`` that the callable ``target`` (a dotted path) takes no argument for."""
    params = inspect.signature(get_object(target)).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    return sorted(str(k) for k in keys if k not in params)


def check_optimizer_arguments(cfg: DictConfig) -> None:
    """Every key of ``module.optimizer`` must be an argument of its class: switching ``_target_``
    keeps the default's keys (``fused``, say), which not every optimizer takes."""
    node = OmegaConf.select(cfg, "module.optimizer", default=None)
    if not isinstance(node, DictConfig) or "_target_" not in node:
        return
    try:
        unknown = unaccepted(node._target_, [k for k in node if not str(k).startswith("_")])
    except Exception:  # an unknown class: instantiating it reports that
        return
    if unknown:
        takes = [k for k in inspect.signature(get_object(node._target_)).parameters if k != "params"]
        raise AttnexpError(
            f"module.optimizer sets {', '.join(unknown)}, which {node._target_} does not take "
            f"(it takes {', '.join(takes)}). Remove the key with "
            f"{' '.join(f'~module.optimizer.{k}' for k in unknown)}, or set module.optimizer._target_ to an optimizer that takes it."
        )


def check_schedule_length(cfg: DictConfig) -> None:
    """A cosine schedule's length ``T_max`` (trainer.max_epochs by default) must be a positive number of epochs."""
    node = OmegaConf.select(cfg, "module.scheduler", default=None)
    if not isinstance(node, DictConfig) or "T_max" not in node:
        return
    t_max = node.T_max
    if not _typed(t_max, int) or t_max <= 0:
        raise AttnexpError(
            f"module.scheduler.T_max={t_max} is not allowed: the cosine schedule anneals the learning rate over "
            "T_max epochs (trainer.max_epochs unless set), so it must be a positive integer. When training by "
            "trainer.max_steps with trainer.max_epochs=-1, set module.scheduler.T_max to the number of epochs "
            "those steps make, or drop the schedule with module/scheduler=null."
        )


def _example(key: str, kind: type) -> str:
    return {"module.optimizer.lr": "3e-3", "model.eps": "1e-9", "model.dropout": "0.1"}.get(key, "1" if kind is int else "0.5")
