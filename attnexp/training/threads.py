"""How many torch threads a run trains with on a CPU: one where a training step is too small to share between cores,
more only where its matrices pay for them.

A second OpenMP thread costs a fork and a join, and a waiting core, in every parallel operation of the step; on a
small model that costs more than it saves, and beside a busy process two threads collapsed (docs/speed.md#threads: the
MNIST model's epoch took 2.5-4x as long on torch's two threads as on one). The work of a step is counted, not guessed:
the floating-point operations of one training batch's forward pass, by torch's own ``FlopCounterMode``, on the real
model and batch before training starts (no weight, random state or batch changes). The count runs with gradients on, as
training does: torch's module tracker, which the counter uses, fails on a parameter's view made without them (a learned
position table). Should counting fail anyway (a network of one's own), the run trains on torch's default threads and
train.log says why; metrics.json records the threads a run trained with (``device.threads``).
"""

from __future__ import annotations

import logging
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.flop_counter import FlopCounterMode

# Forward FLOPs of one training step that pay for each thread (docs/speed.md#threads): two threads paid on
# experiment=nanogpt_char (1.3 GFLOP), not on the MNIST model (0.02 GFLOP); the steps between get one thread.
FLOPS_PER_THREAD = 5.0e8
MOST = torch.get_num_threads()  # torch's default when this module is first imported: OMP_NUM_THREADS, else the cores
log = logging.getLogger("attnexp")


def threads_for(flops: float, most: int) -> int:
    """Threads for a training step whose forward pass does ``flops`` floating-point operations: one per
    :data:`FLOPS_PER_THREAD`, at least one, at most ``most`` (the cores torch may use)."""
    return max(1, min(most, int(flops // FLOPS_PER_THREAD)))


def forward_flops(pl_module: Any, batch: Any) -> int:
    """The floating-point operations of ``pl_module``'s training forward pass on ``batch`` (its loss included), run in
    evaluation mode with torch's random state restored, its graph dropped unused: nothing it leaves behind differs."""
    training = pl_module.training
    pl_module.eval()
    try:
        with torch.random.fork_rng(devices=[]), torch.enable_grad(), FlopCounterMode(display=False) as counter:
            pl_module._step(batch)
    finally:
        pl_module.train(training)
    return counter.get_total_flops()


class ThreadRule(pl.Callback):
    """Torch's threads for a run: ``requested`` when given (the user's ``threads=N``), from the moment it is made. Else
    one thread (data and weights are made the same way on every machine) until fitting starts, before anything records
    them: then on a CPU :func:`threads_for` the forward FLOPs of the first training batch, at most torch's default
    (:data:`MOST`) and a parallel sweep job's ``share`` of the cores; on another accelerator the host only feeds the
    device, and one thread does."""

    def __init__(self, requested: int | None = None, share: int | None = None) -> None:
        self.requested, self.most = requested, min(share or MOST, MOST)
        torch.set_num_threads(requested or 1)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.requested and trainer.strategy.root_device.type == "cpu":
            torch.set_num_threads(self.choose(trainer, pl_module))

    def choose(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> int:
        """:func:`threads_for` the first training batch; one thread where there is none to count, torch's default
        (at most the share) where counting fails."""
        datamodule = getattr(trainer, "datamodule", None)
        if self.most <= 1 or datamodule is None or not hasattr(pl_module, "_step"):
            return 1
        try:
            with torch.random.fork_rng(devices=[]):  # a data module of one's own may draw from torch's generator
                batch = next(iter(datamodule.train_dataloader()), None)
            return 1 if batch is None else threads_for(forward_flops(pl_module, batch), self.most)
        except Exception as err:  # the count only picks a speed: a failure costs the run nothing but that
            log.warning(
                f"Could not count the work of a training step to choose torch's threads ({type(err).__name__}: "
                f"{err}); training on {self.most}, torch's default. threads=N chooses them."
            )
            return self.most
