"""Ctrl-C while fitting waits for the next batch boundary; a second one interrupts at once; Lightning's SIGTERM
handler logs nothing from inside a signal handler."""

from __future__ import annotations

import io
import logging
import os
import signal
import warnings

import pytest
import pytorch_lightning as pl

from attnexp.cli import console
from attnexp.training import stop_request
from attnexp.training.callbacks.interrupt import DeferredInterrupt


def test_ctrl_c_is_raised_at_the_next_batch_end_then_the_handler_is_restored():
    before = signal.getsignal(signal.SIGINT)
    callback = DeferredInterrupt()
    callback.on_fit_start(None, None)
    try:
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt here, inside whatever the program was doing
        assert stop_request.requested() == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            callback.on_train_batch_end(None, None, None, None, 0)
        callback.on_train_batch_end(None, None, None, None, 1)  # raised once
        with pytest.raises(KeyboardInterrupt):  # a second Ctrl-C: immediate
            os.kill(os.getpid(), signal.SIGINT)
            callback.raised = None  # the handler runs before this line
    finally:
        callback.teardown(None, None, "fit")
        stop_request.clear()
    assert signal.getsignal(signal.SIGINT) is before


class RefusesReentrantWrites(io.StringIO):
    """A log stream that, like a buffered file, refuses a write that starts while another is in progress; a line
    with "now" in it receives SIGTERM mid-write."""

    busy = False

    def write(self, text: str) -> int:
        if self.busy:
            raise RuntimeError("reentrant call inside the stream")
        self.busy = True
        try:
            if "now" in text:
                os.kill(os.getpid(), signal.SIGTERM)  # the handlers run before this write returns
            return super().write(text)
        finally:
            self.busy = False


@pytest.mark.parametrize("configured", [True, False])
def test_sigterm_during_a_log_write_prints_no_logging_error(capsys, configured):
    """Lightning's SIGTERM handler logs a line; landing inside a write to train.log, that made the write reentrant and
    logging printed a "Logging error" traceback (without the runner's console setup it still does)."""
    root, quiet = logging.getLogger(), logging.getLogger(console.IN_SIGNAL_HANDLER)
    stream = RefusesReentrantWrites()
    handler, level, showwarning = logging.StreamHandler(stream), root.level, warnings.showwarning
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    previous = signal.signal(signal.SIGTERM, stop_request.StopOnSignal())
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
    try:
        if configured:
            console.configure(multirun=False)
        trainer._signal_connector.register_signal_handlers()  # as Lightning does when fitting starts
        logging.getLogger("attnexp").info("epoch 1 ends now")
        assert stop_request.requested() == signal.SIGTERM  # Lightning's handler passed it on to the one before it
        assert "epoch 1 ends now" in stream.getvalue()
        assert ("Logging error" in capsys.readouterr().err) is not configured
    finally:
        trainer._signal_connector.teardown()
        signal.signal(signal.SIGTERM, previous)
        stop_request.clear()
        root.removeHandler(handler)
        root.setLevel(level)
        quiet.setLevel(logging.NOTSET)
        warnings.showwarning = showwarning
