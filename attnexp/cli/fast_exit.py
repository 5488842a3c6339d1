"""Console scripts end as soon as their work is written: Python's own teardown of torch, Lightning and
the libraries they load frees every module one by one, which takes over a second and saves nothing."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn


def run_then_exit(main: Callable[[], Any]) -> NoReturn:
    """Call ``main`` and exit with its status. The interpreter's exit runs as usual up to its teardown:
    threads are joined (pools shut down, a parallel launcher's workers included), exit handlers run and
    output is flushed; logs, TensorBoard files and checkpoints are closed by then. KeyboardInterrupt exits with
    status 130 and no traceback; any other exception but SystemExit propagates as usual, traceback included."""
    try:
        main()
        code: Any = 0
    except SystemExit as stop:
        code = stop.code
    except KeyboardInterrupt:  # a second Ctrl-C stopping at once: the messages were printed
        code = 130
    if code is not None and not isinstance(code, int):  # a message, as sys.exit takes one
        print(code, file=sys.stderr)
        code = 1
    threading._shutdown()  # what Python's exit does first, then its exit handlers
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
