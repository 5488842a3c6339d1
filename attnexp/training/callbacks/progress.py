"""Progress on the console: Lightning's bar with epochs counted from 1 and the numbers that matter, and a line per
epoch that stays (the bar is redrawn in place)."""

from __future__ import annotations

import logging
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import TQDMProgressBar

DIGITS = 4
log = logging.getLogger("attnexp.epochs")  # the console of a single run; a sweep job's train.log


class EpochProgressBar(TQDMProgressBar):
    """``Epoch 3/5`` as the curves, checkpoints and metrics.json count, with the last epoch's training loss and the
    task's validation metric beside the bar."""

    def on_train_epoch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        super().on_train_epoch_start(trainer, *args)
        total = f"/{trainer.max_epochs}" if trainer.max_epochs and trainer.max_epochs > 0 else ""
        self.train_progress_bar.set_description(f"Epoch {trainer.current_epoch + 1}{total}")

    def get_metrics(self, trainer: pl.Trainer, pl_module: Any) -> dict[str, Any]:
        found = {key: trainer.callback_metrics.get(key) for key in ("train/loss", pl_module.task.monitor)}
        return {key: f"{float(value):.{DIGITS}f}" for key, value in found.items() if value is not None}


class EpochLines(pl.Callback):
    """Logs ``epoch 3/5: train/loss 0.4123, val/acc 0.9111 (best 0.9222)`` once each epoch has ended, its metrics
    logged (at the next epoch's start, and at the end of training for the last one)."""

    def __init__(self) -> None:
        self.first = 0
        self.validated = False

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.first = trainer.current_epoch  # after a resumed checkpoint is restored

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.validated = self.validated or not trainer.sanity_checking

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        """The line of the epoch that has just ended (the last one: when training ends)."""
        if trainer.current_epoch <= self.first:
            return
        epoch, metrics, monitor = trainer.current_epoch, trainer.callback_metrics, pl_module.task.monitor
        total = f"/{trainer.max_epochs}" if trainer.max_epochs and trainer.max_epochs > 0 else ""
        parts = [f"{key} {float(metrics[key]):.{DIGITS}f}" for key in ("train/loss",) if key in metrics]
        if self.validated and monitor in metrics:
            best = getattr(trainer.checkpoint_callback, "best_model_score", None)
            parts.append(
                f"{monitor} {float(metrics[monitor]):.{DIGITS}f}"
                + ("" if best is None else f" (best {float(best):.{DIGITS}f})")
            )
        self.validated = False
        log.info(f"epoch {epoch}{total}: {', '.join(parts) or 'no metrics'}")

    on_train_end = on_train_epoch_start
