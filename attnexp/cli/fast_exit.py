"""Console scripts end as soon as their work is written: at exit, Python's garbage collector would walk every object
of torch, Lightning and the libraries they load once more, which takes seconds and frees nothing that matters."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import Any, NoReturn


def run_then_exit(main: Callable[[], Any]) -> NoReturn:
    """Call ``main`` and exit with its status, as Python exits (threads joined, exit handlers run, output flushed),
    but with every object frozen (``gc.freeze``) so that the collections of the interpreter's teardown skip them.
    KeyboardInterrupt exits with status 130 and no traceback; any other exception propagates as usual."""
    try:
        main()
        code: Any = 0
    except SystemExit as stop:
        code = stop.code
    except KeyboardInterrupt:  # a second Ctrl-C stopping at once: the messages were printed
        code = 130
    gc.freeze()
    sys.exit(code)
