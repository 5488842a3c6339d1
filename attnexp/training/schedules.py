"""Learning-rate schedules built from torch's own schedulers, for ``module/scheduler=`` options that one torch class
cannot express."""

from __future__ import annotations

from torch.optim import Optimizer
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, LRScheduler, SequentialLR

from attnexp.errors import AttnexpError


def warmup_cosine(optimizer: Optimizer, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> LRScheduler:
    """A linear warmup from lr / (warmup_steps + 1) over ``warmup_steps`` steps, then a cosine from lr down to
    ``min_lr``
    at step ``total_steps`` (GPT-2 style; stepped after every optimizer step, ``module.scheduler_interval=step``)."""
    if not (isinstance(warmup_steps, int) and isinstance(total_steps, int) and 0 <= warmup_steps < total_steps):
        raise AttnexpError(
            f"module.scheduler.warmup_steps={warmup_steps} and total_steps={total_steps} must be integers with "
            "0 <= warmup_steps < total_steps (optimizer steps), e.g. warmup_steps=100 total_steps=2000."
        )
    cosine = CosineAnnealingLR(optimizer, T_max=total_steps - warmup_steps, eta_min=min_lr)
    if warmup_steps == 0:
        return cosine
    warmup = LinearLR(
        optimizer,
        start_factor=1 / (warmup_steps + 1),
        end_factor=warmup_steps / (warmup_steps + 1),
        total_iters=warmup_steps - 1,
    )
    return SequentialLR(optimizer, [warmup, cosine], milestones=[warmup_steps])
