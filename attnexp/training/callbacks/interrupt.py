"""Ctrl-C stops training and testing at the next batch boundary, as Lightning already does for SIGTERM."""

from __future__ import annotations

import signal
import threading
from typing import Any

import pytorch_lightning as pl

from attnexp.training import stop_request


class DeferredInterrupt(pl.Callback):
    """A stop request (:mod:`attnexp.training.stop_request`, the SIGINT handler while fitting) raises
    KeyboardInterrupt at the next batch or epoch end, where Lightning's interrupt path follows; a second Ctrl-C
    interrupts at once. Python's own handler raises on any line: inside TensorBoard's event queue that left its writer
    waiting 120 s at close."""

    def __init__(self) -> None:
        self.previous: Any = None
        self.raised = False

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if threading.current_thread() is threading.main_thread():
            stop_request.clear()
            self.previous = signal.signal(signal.SIGINT, stop_request.StopOnSignal())

    def _check(self, *args: Any, **kwargs: Any) -> None:
        if stop_request.requested() and not self.raised:
            self.raised = True
            raise KeyboardInterrupt

    on_train_batch_end = on_validation_batch_end = on_train_epoch_end = on_validation_end = on_test_batch_end = _check

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None
