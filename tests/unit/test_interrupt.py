"""Ctrl-C while fitting waits for the next batch boundary; a second one interrupts at once."""

from __future__ import annotations

import os
import signal

import pytest

from attnexp.callbacks.interrupt import DeferredInterrupt


def test_ctrl_c_is_raised_at_the_next_batch_end_then_the_handler_is_restored():
    before = signal.getsignal(signal.SIGINT)
    callback = DeferredInterrupt()
    callback.on_fit_start(None, None)
    try:
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt here, inside whatever the program was doing
        assert callback.requested
        with pytest.raises(KeyboardInterrupt):
            callback.on_train_batch_end(None, None, None, None, 0)
        callback.on_train_batch_end(None, None, None, None, 1)  # raised once
        with pytest.raises(KeyboardInterrupt):  # a second Ctrl-C: Python's own handler, immediate
            os.kill(os.getpid(), signal.SIGINT)
            callback.requested = None  # the handler runs before this line
    finally:
        callback.teardown(None, None, "fit")
    assert signal.getsignal(signal.SIGINT) is before
