"""Stopping on request. SIGINT (Ctrl-C) and SIGTERM (``timeout``, schedulers, ``docker stop``) record a request
to stop: training acts on it at its next batch boundary (:class:`attnexp.callbacks.interrupt.DeferredInterrupt`),
which leaves a checkpoint and a record that say so, and a sweep job that has not started does not start.

Where :class:`StopOnSignal` says ``at_once``, a second signal stops at once (a single run's second Ctrl-C, a
sweep's main process). A sweep's parallel jobs never stop at once: one Ctrl-C reaches them twice (from the
terminal and forwarded by the sweep, :mod:`attnexp.cli.sweep`), and they wait for their batch boundary.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_first: list[int] = []  # the signal that asked this process to stop, once one did


def requested() -> int | None:
    """The signal that asked this process to stop, or None."""
    return _first[0] if _first else None


def clear() -> None:
    """Forget a request: a new single run starts with none."""
    _first.clear()


class StopOnSignal:
    """A signal handler that records the first SIGINT or SIGTERM as the stop request and calls ``on_first`` with
    it; with ``at_once``, a later one raises KeyboardInterrupt where the program is."""

    def __init__(self, at_once: bool, on_first: Callable[[int], Any] | None = None) -> None:
        self.at_once, self.on_first = at_once, on_first

    def __call__(self, signum: int, frame: Any) -> None:
        if not _first:
            _first.append(signum)
            if self.on_first is not None:
                self.on_first(signum)
        elif self.at_once:
            raise KeyboardInterrupt


def install(handler: StopOnSignal, signals: tuple[int, ...] = SIGNALS) -> dict[int, Any]:
    """Make ``handler`` handle ``signals`` (from the main thread); return the handlers it replaced."""
    return {s: signal.signal(s, handler) for s in signals}


def installed() -> bool:
    """Whether SIGINT already goes to a :class:`StopOnSignal` (a sweep's): a run inside it keeps that one."""
    return isinstance(signal.getsignal(signal.SIGINT), StopOnSignal)


def in_sweep_worker() -> None:
    """Initializer of a parallel sweep's worker processes: SIGINT and SIGTERM record a stop request from the start,
    idle or busy, and never kill the worker (the sweep then could not collect its jobs' results)."""
    install(StopOnSignal(at_once=False))
