"""What a run prints: a single run's console (stderr) gets its folder, a line per epoch, the result, warnings, errors;
Lightning's INFO lines and deprecation warnings go to train.log only, as do a sweep job's (which prints one line)."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

QUIET_IN_SWEEPS = ("pytorch_lightning", "lightning_fabric", "lightning", "py.warnings", "attnexp.epochs")
LIBRARIES = ("pytorch_lightning", "lightning_fabric", "lightning", "py.warnings", "torch")
DEPRECATIONS = ("DeprecationWarning", "FutureWarning", "deprecated")
# Lightning's hint, wherever SLURM is installed, to start Python under srun: attnexp's runs reach SLURM through its
# launcher (docs/clusters.md), and a run on the login node is meant to run there
NOT_FOR_ATTNEXP = ("The `srun` command is available on your system but is not used",)
# Logs "Received SIGTERM" from inside its signal handler, where a log write that a signal interrupts is reentrant
IN_SIGNAL_HANDLER = "pytorch_lightning.trainer.connectors.signal_connector"


class ConsoleFilter(logging.Filter):
    """On the console handler: the libraries' messages below WARNING, deprecation warnings and advice that does not
    apply to attnexp's commands stay in train.log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(LIBRARIES):
            return True
        text = record.getMessage()
        return record.levelno >= logging.WARNING and not any(d in text for d in (*DEPRECATIONS, *NOT_FOR_ATTNEXP))


class ConsoleFormatter(logging.Formatter):
    """Console lines: the runner's own messages as they are; a library's warning or error says whose it is."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.levelno >= logging.WARNING and not record.name.startswith("attnexp"):
            text = f"{record.levelname.capitalize()} ({record.name}): {text}"
        return text


class RunLog(logging.FileHandler):
    """The run's train.log, which stops at a full disk: no "Logging error" and traceback for each line that finds no
    room, as logging prints them; the run's failure says the disk is full on the console."""

    full = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.full:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        from attnexp.errors import is_disk_full

        error = sys.exc_info()[1]
        if error is None or not is_disk_full(error):
            super().handleError(record)
            return
        self.full, stream = True, self.stream
        self.stream = None
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()  # the file is closed, what it could not write dropped


def quiet_on_full_disk(hook: Any) -> Any:
    """A ``threading.excepthook`` that prints nothing for a thread's write that found the disk full (TensorBoard's
    event writer), which the command's failure says, and hands any other to ``hook``."""
    from attnexp.errors import is_disk_full

    def excepthook(args: Any) -> None:
        if args.exc_value is None or not is_disk_full(args.exc_value):
            hook(args)

    return excepthook


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


def bar_safe() -> contextlib.AbstractContextManager[None]:
    """Console log lines written above the progress bars while they are drawn."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    return logging_redirect_tqdm()


def configure(multirun: bool) -> None:
    """Warnings as log records, no logging from inside Lightning's SIGTERM handler; in a sweep, Lightning's loggers,
    warnings and epoch lines to the job's train.log alone. (The console's filter: configs/hydra/default.yaml.)"""
    logging.captureWarnings(True)
    logging.getLogger(IN_SIGNAL_HANDLER).setLevel(logging.WARNING)
    root = logging.getLogger()
    for name in QUIET_IN_SWEEPS[:3]:  # Lightning gives its loggers a handler of their own if imported before Hydra's
        logging.getLogger(name).handlers, logging.getLogger(name).propagate = [], True
    files = [h for h in root.handlers if isinstance(h, logging.FileHandler)]  # Hydra's train.log
    for name in QUIET_IN_SWEEPS if multirun else ():
        logging.getLogger(name).handlers, logging.getLogger(name).propagate = list(files), False


def detach_files(folder: Path) -> None:
    """Stop logging into ``folder`` (Hydra's train.log handler there): a start that does not run writes nothing into
    the folder of the run that does."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, logging.FileHandler)]:
        if Path(handler.baseFilename).is_relative_to(Path(folder).absolute()):
            root.removeHandler(handler)
            handler.close()
