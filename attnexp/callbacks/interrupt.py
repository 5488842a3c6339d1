"""Ctrl-C during training stops at the next batch boundary, as Lightning already does for SIGTERM."""

from __future__ import annotations

import signal
import threading
from typing import Any

import pytorch_lightning as pl


class DeferredInterrupt(pl.Callback):
    """While fitting, SIGINT only records the request; the next batch end or epoch end raises KeyboardInterrupt,
    and Lightning's usual interrupt path follows (``interrupted.ckpt``, status ``interrupted``, exit 130).

    Python's default handler raises at whatever line the main thread is on. Inside
    ``threading.Condition.notify`` (TensorBoard's event queue, written at every epoch end) that leaves a stale
    waiter, the writer thread misses its wake-up, and closing the logger waited up to its ``flush_secs``
    (120 s). A second Ctrl-C interrupts at once.
    """

    def __init__(self) -> None:
        self.requested, self.previous = False, None

    def _handler(self, signum: int, frame: Any) -> None:
        self.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handler)

    def _check(self, *args: Any) -> None:
        if self.requested:
            self.requested = False
            raise KeyboardInterrupt

    on_train_batch_end = on_validation_batch_end = on_train_epoch_end = on_validation_end = _check

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None
