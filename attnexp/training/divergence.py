"""The divergence check: the training losses since the last check, looked at with one host sync; and, where one is NaN
or infinite, the first step that made it replayed to find the mixer that made the NaN."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor, nn

from attnexp.mixers.frames import Origin
from attnexp.mixers.tracing import traced


class DivergedError(RuntimeError):
    """The training loss became NaN or infinite (at ``step``); ``origin``: where a mixer made the first NaN or
    infinity from finite inputs on that step's batch, when one did."""

    def __init__(self, message: str, step: int | None = None, epoch: int | None = None) -> None:
        super().__init__(message)
        self.step, self.epoch = step, epoch
        self.origin: Origin | None = None


class LossWatch:
    """Keeps each batch's (optimizer step, loss) on the device; :meth:`check` looks at them all at once. Until a loss
    is NaN or infinite it also keeps, on the device and without a host read, the network's state before each step
    (:meth:`before`), so that the first step whose loss is not finite can be replayed at the parameters it ran with
    (:meth:`replay`)."""

    def __init__(self, every: int) -> None:
        self.every = every
        self.unchecked: list[tuple[int, Tensor, Any]] = []  # (step, loss, batch: a reference, not a copy)
        self.kept: dict[str, Tensor] = {}  # the state before the first step whose loss is not finite (or the last)
        self.sound: Tensor | None = None  # every loss so far finite (a boolean on the device)
        self.bad_batch: Any = None

    def before(self, state: dict[str, Tensor]) -> None:
        """Before a step: keep the network's state (``state_dict``) while every loss so far is finite."""
        if not self.kept or self.sound is None:
            self.kept = {k: v.detach().clone() for k, v in state.items()}
            return
        for k, v in state.items():  # in place: no memory allocated per step
            torch.where(self.sound, v.detach(), self.kept[k], out=self.kept[k])

    def note(self, step: int, loss: Tensor, batch: Any = None) -> None:
        loss = loss.detach()
        self.unchecked.append((step, loss, batch))
        finite = torch.isfinite(loss).all()
        self.sound = finite if self.sound is None else self.sound & finite

    @property
    def due(self) -> bool:
        """Whether ``every`` batches went by since the last check."""
        return len(self.unchecked) >= self.every

    def check(self, epoch: int) -> None:
        """Raise :class:`DivergedError` naming the first step since the last check whose loss was not finite
        (``epoch``: the epoch it trains, counted from 1)."""
        if not self.unchecked:
            return
        steps, losses, batches = zip(*self.unchecked)
        self.unchecked = []
        bad = (~torch.isfinite(torch.stack(losses))).nonzero()  # one host sync
        if len(bad):
            first = int(bad[0])
            self.bad_batch = batches[first]
            kept = (
                "checkpoints/last.ckpt still holds the last good epoch"
                if epoch > 1
                else "no epoch had finished, so no checkpoint was written"
            )
            raise DivergedError(
                f"The training loss became NaN or infinite at step {steps[first]} (epoch {epoch}). "
                f"Training stopped; {kept}. Usual causes: "
                "a learning rate that is too high (module.optimizer.lr), or 16-bit precision overflow "
                "(try trainer.precision=32-true or bf16-mixed); trainer.gradient_clip_val=1.0 also helps.",
                steps[first],
                epoch,
            )

    def replay(self, net: nn.Module, forward: Any) -> Origin | None:
        """Where a mixer first made a NaN or infinity from finite inputs when the first step whose loss was not
        finite runs again: its batch through ``forward(net, batch)`` on a copy of ``net`` at the state that step
        started from, in training mode, the random state restored. Only a NaN made from finite inputs counts there:
        an overflow to infinity is what parameters grown by too high a learning rate make. None where no mixer made
        one (the loss, the backward pass, the optimizer did)."""
        if self.bad_batch is None or not self.kept:
            return None
        again = copy.deepcopy(net)
        again.load_state_dict(self.kept)
        again.train()
        devices = [p.device for p in again.parameters() if p.device.type == "cuda"][:1]
        with torch.random.fork_rng(devices=devices):
            trace, _ = traced(lambda: forward(again, self.bad_batch))
        return trace.first_nonfinite(nan=True)
