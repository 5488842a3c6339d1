"""What a run prints. A single run's console (stderr): its folder at the start, a line per epoch, the test result,
where its files are, warnings and errors. Lightning's INFO lines (devices, batch limits, restored checkpoints), the
model summary and library deprecation warnings go to the run's train.log only, Lightning's advertising tips nowhere.
In a multirun each job's Lightning messages, warnings and epoch lines go to its train.log only, and the job prints
one result line. Log lines never break a progress bar."""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from collections.abc import Iterator
from typing import Any, TextIO

QUIET_IN_SWEEPS = (
    "pytorch_lightning",
    "lightning_fabric",
    "lightning",
    "py.warnings",
    "attnexp.epochs",
    "attnexp.weights",
)
LIBRARIES = ("pytorch_lightning", "lightning_fabric", "lightning", "py.warnings", "torch")
RANK_ZERO = ("pytorch_lightning.utilities.rank_zero", "lightning_fabric.utilities.rank_zero")
# Logs "Received SIGTERM" from inside its signal handler: a signal that lands while a handler is writing to the same
# file or stream makes that write reentrant, and logging prints a "Logging error" traceback. Our own stop message
# says the same thing from outside the handler (attnexp.callbacks.interrupt, attnexp.cli.sweep).
IN_SIGNAL_HANDLER = "pytorch_lightning.trainer.connectors.signal_connector"


class NoAdvertising(logging.Filter):
    """Drops Lightning's "Tip: ... try installing ..." messages."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Tip:" not in str(record.msg)[:8]


class LibraryInfoToFile(logging.Filter):
    """On the console handler: the libraries' messages below WARNING stay in train.log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not record.name.startswith(LIBRARIES)


class ConsoleFormatter(logging.Formatter):
    """Console lines: the runner's own messages as they are; a library's warning or error says whose it is."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.levelno >= logging.WARNING and not record.name.startswith("attnexp"):
            text = f"{record.levelname.capitalize()} ({record.name}): {text}"
        return text


class BarSafeStream:
    """A console stream that clears the progress bars before writing a line and draws them again after it."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> None:
        from tqdm import tqdm

        tqdm.write(text, file=self.stream, end="")

    def flush(self) -> None:
        self.stream.flush()


@contextlib.contextmanager
def quiet(level: int, *names: str) -> Iterator[None]:
    """The loggers ``names`` at ``level`` for the time of a block, then at their own levels again."""
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(level)
    try:
        yield
    finally:
        for name, was in levels.items():
            logging.getLogger(name).setLevel(was)


def show_warning(
    message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    """Python warnings as log records of ``py.warnings``: deprecations at INFO (train.log only), others at WARNING."""
    level = (
        logging.INFO
        if issubclass(category, (DeprecationWarning, PendingDeprecationWarning, FutureWarning))
        else logging.WARNING
    )
    logging.getLogger("py.warnings").log(level, f"{category.__name__}: {message} ({filename}:{lineno})")


def configure(multirun: bool) -> None:
    """Install the filters and the warning hook and keep logging out of Lightning's SIGTERM handler; in a multirun
    route Lightning's loggers, warnings and epoch lines to the job's log file alone."""
    for name in RANK_ZERO:
        logger = logging.getLogger(name)
        if not any(isinstance(f, NoAdvertising) for f in logger.filters):
            logger.addFilter(NoAdvertising())
    logging.getLogger(IN_SIGNAL_HANDLER).setLevel(logging.WARNING)
    warnings.showwarning = show_warning
    root = logging.getLogger()
    files = [h for h in root.handlers if isinstance(h, logging.FileHandler)]  # Hydra's train.log
    if multirun:
        for name in QUIET_IN_SWEEPS:
            logger = logging.getLogger(name)
            logger.handlers, logger.propagate = list(files), False
        return
    for handler in root.handlers:
        if type(handler) is logging.StreamHandler and not any(
            isinstance(f, LibraryInfoToFile) for f in handler.filters
        ):
            handler.addFilter(LibraryInfoToFile())
            if handler.stream in (sys.stderr, sys.stdout):
                handler.setStream(BarSafeStream(handler.stream))


def model_summary(module: Any) -> str:
    """The model's top-level modules with their parameter counts (Lightning's summary without its FLOPs column,
    which counts nothing without an example input)."""
    from pytorch_lightning.utilities.model_summary import ModelSummary

    summary = ModelSummary(module, max_depth=2)
    rows = [
        f"  {name:<40} {kind:<28} {count:>12,}"
        for name, kind, count in zip(summary.layer_names, summary.layer_types, summary.param_nums)
    ]
    return "\n".join(
        ["Model:", *rows, f"  {summary.total_parameters:,} parameters, {summary.trainable_parameters:,} trainable"]
    )
