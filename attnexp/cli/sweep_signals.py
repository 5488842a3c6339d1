"""A sweep stops cleanly on SIGINT or SIGTERM, whether the signal reaches the whole process group (Ctrl-C in a
terminal, a scheduler) or the main process alone (``kill``, ``timeout``, ``docker stop``).

The main process records the request and forwards it to the parallel launcher's worker processes; their jobs stop
at their next batch boundary and end ``interrupted`` with ``checkpoints/interrupted.ckpt``, jobs not started yet do
not start, and the sweep ends with one message and exit status 130 (:class:`attnexp.cli.sweep.SweepCallback`).
The workers record such signals from the moment they start (:func:`attnexp.stop_request.in_sweep_worker`, their
initializer), and end with the sweep's process (joblib shuts its pool down at exit): no process outlives it. A
second signal to the main process stops at once: the workers are killed and their jobs' records stay ``running``,
which summaries report as ``abandoned``
and ``resume=true`` continues from the last finished epoch.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import signal
import sys
from typing import Any

from attnexp import stop_request


def install() -> None:
    """In the sweep's main process: its signal handler, and worker pools whose workers record signals from the start
    (joblib's process pool, the backend Hydra's joblib launcher asks for by name, with an initializer)."""
    from joblib import register_parallel_backend
    from joblib.parallel import LokyBackend

    register_parallel_backend("loky", functools.partial(LokyBackend, initializer=stop_request.in_sweep_worker))
    stop_request.clear()
    stop_request.install(SweepStop(at_once=True, on_first=forward))


class SweepStop(stop_request.StopOnSignal):
    """The main process's handler: the first signal is forwarded to the jobs; a second one kills them first."""

    def __call__(self, signum: int, frame: Any) -> None:
        if stop_request.requested():
            say(
                "\nStopping at once: the jobs that were running are killed; their metrics.json stays at running "
                "(reported as abandoned). The same command with resume=true continues them from their last "
                "finished epoch."
            )
            for worker in workers():
                worker.kill()
        super().__call__(signum, frame)


def forward(signum: int) -> None:
    """Pass the stop request on to every worker, and say what happens now."""
    name = signal.Signals(signum).name
    say(
        f"\n{name}: stopping the sweep. Each running job stops at its next batch boundary and saves "
        "checkpoints/interrupted.ckpt; jobs not started yet are skipped. Another Ctrl-C or SIGTERM stops at once."
    )
    for worker in workers():
        with contextlib.suppress(ProcessLookupError, TypeError):  # ended meanwhile (no pid once reaped)
            os.kill(worker.pid, signum)  # type: ignore[arg-type]


def say(text: str) -> None:
    """A line on stderr from a signal handler: written to the file descriptor, because the handler may run while the
    program is inside a write to sys.stderr, and writing to it again there raises "reentrant call"."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an object without a descriptor (a test's capture)
        print(text, file=sys.stderr, flush=True)
        return
    os.write(fd, f"{text}\n".encode())


def workers() -> list[multiprocessing.process.BaseProcess]:
    """The live worker processes of the parallel launcher (none with the basic launcher: jobs run in this process)."""
    from joblib.externals.loky.backend.process import LokyProcess

    return [p for p in multiprocessing.active_children() if isinstance(p, LokyProcess)]
