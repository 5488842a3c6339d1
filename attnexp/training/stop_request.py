"""Stopping on request. Ctrl-C during a single run's fit records a request to stop: training acts on it at its next
batch boundary (:class:`attnexp.training.callbacks.interrupt.DeferredInterrupt`), which leaves a checkpoint and a
record that say so; a second Ctrl-C stops at once. (SIGTERM reaches Lightning's own handler, which stops the fit
alike.)"""

from __future__ import annotations

from typing import Any

_first: list[int] = []  # the signal that asked this process to stop, once one did


def requested() -> int | None:
    """The signal that asked this process to stop, or None."""
    return _first[0] if _first else None


def clear() -> None:
    """Forget a request: a new run starts with none."""
    _first.clear()


class StopOnSignal:
    """A signal handler that records the first signal as the stop request; a later one raises KeyboardInterrupt
    where the program is."""

    def __call__(self, signum: int, frame: Any) -> None:
        if _first:
            raise KeyboardInterrupt
        _first.append(signum)
