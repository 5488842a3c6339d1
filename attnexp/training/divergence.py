"""The divergence check: the training losses since the last check, looked at with one host sync."""

from __future__ import annotations

import torch
from torch import Tensor


class DivergedError(RuntimeError):
    """The training loss became NaN or infinite."""


class LossWatch:
    """Keeps each batch's (optimizer step, loss) on the device; :meth:`check` looks at them all at once."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.unchecked: list[tuple[int, Tensor]] = []

    def note(self, step: int, loss: Tensor) -> None:
        self.unchecked.append((step, loss.detach()))

    @property
    def due(self) -> bool:
        """Whether ``every`` batches went by since the last check."""
        return len(self.unchecked) >= self.every

    def check(self, epoch: int) -> None:
        """Raise :class:`DivergedError` naming the first step since the last check whose loss was not finite
        (``epoch``: the epoch it trains, counted from 1)."""
        if not self.unchecked:
            return
        steps, losses = zip(*self.unchecked)
        self.unchecked = []
        bad = (~torch.isfinite(torch.stack(losses))).nonzero()  # one host sync
        if len(bad):
            kept = (
                "checkpoints/last.ckpt still holds the last good epoch"
                if epoch > 1
                else "no epoch had finished, so no checkpoint was written"
            )
            raise DivergedError(
                f"The training loss became NaN or infinite at step {steps[int(bad[0])]} (epoch {epoch}). "
                f"Training stopped; {kept}. Usual causes: "
                "a learning rate that is too high (module.optimizer.lr), or 16-bit precision overflow "
                "(try trainer.precision=32-true or bf16-mixed); trainer.gradient_clip_val=1.0 also helps."
            )
