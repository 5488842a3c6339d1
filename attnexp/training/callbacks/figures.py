"""The callback that draws the task's figures at the end of training and writes them to TensorBoard and the
trackers (:func:`attnexp.runs.trackers.log_figure`)."""

from __future__ import annotations

import functools
import logging
import weakref
from typing import Any

import pytorch_lightning as pl
import torch
from torch import Tensor

from attnexp.mixers import is_mixer
from attnexp.runs import trackers

log = logging.getLogger("attnexp.weights")  # a sweep's jobs write it to their train.log only
NOTED: weakref.WeakSet = weakref.WeakSet()  # the networks whose missing weights were said once already


class Figures(pl.Callback):
    """Logs the figures of the module's task (:meth:`attnexp.tasks.Task.figures`) once, when fit ends."""

    def on_fit_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if not trainer.is_global_zero:
            return
        experiments = (getattr(lg, "experiment", None) for lg in trainer.loggers)
        writers: list[Any] = [w for w in experiments if hasattr(w, "add_figure")]  # TensorBoard's take figures
        if not writers and not trackers.take_figures(trainer.loggers):
            return
        figures = pl_module.task.figures(
            functools.partial(forward_with_weights, pl_module), getattr(trainer, "datamodule", None)
        )
        for tag, fig in figures.items():
            for writer in writers:  # at the last epoch trained (from 1): the curves' x axis
                writer.add_figure(tag, fig, global_step=trainer.current_epoch, close=False)  # not pyplot's to close
            trackers.log_figure(trainer.loggers, tag, fig, trainer.current_epoch)


def forward_with_weights(pl_module: Any, x: Tensor) -> tuple[Tensor, list[Tensor | None]]:
    """The network on ``x`` as :func:`evaluated` runs it, returning float32 logits and each layer's weights."""
    logits, maps = evaluated(pl_module, x, need_weights=True)
    note_missing_weights(pl_module, maps)
    return logits.float(), [m if m is None else m.float() for m in maps]


def evaluated(pl_module: Any, x: Tensor, need_weights: bool = False) -> Any:
    """The network in eval mode on ``x`` (through its task: an encoder-decoder decodes its own output) at the
    trainer's precision, without gradients; its mode is restored."""
    net, precision = pl_module.net, pl_module.trainer.precision_plugin
    was_training = net.training
    net.eval()
    try:
        with torch.no_grad(), precision.forward_context():
            inputs = precision.convert_input(x.to(pl_module.device))
            return pl_module.task.forward(net, inputs, need_weights=need_weights)
    finally:
        net.train(was_training)


def note_missing_weights(pl_module: Any, maps: list[Tensor | None]) -> None:
    """Say once per module when none of its mixers returns weights (``forward(..., need_weights=True)`` gave None):
    there is then no attention telemetry and no attention figure, which is no failure."""
    mixers = sorted({type(m).__name__ for m in pl_module.net.modules() if is_mixer(m)})
    if pl_module.net in NOTED or not mixers or any(m is not None for m in maps):
        return
    NOTED.add(pl_module.net)
    log.info(
        f"{', '.join(mixers)} returns no attention weights (forward(..., need_weights=True) gave None): no attention "
        "telemetry and no attention figures for this run."
    )
