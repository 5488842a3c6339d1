"""What a run prints. Lightning's advertising tips never; in a multirun, each job's Lightning messages, warnings,
progress bars and tables go to its train.log only, and the job prints one result line."""

from __future__ import annotations

import logging

QUIET_IN_SWEEPS = ("pytorch_lightning", "lightning_fabric", "lightning", "py.warnings")
RANK_ZERO = ("pytorch_lightning.utilities.rank_zero", "lightning_fabric.utilities.rank_zero")


class NoAdvertising(logging.Filter):
    """Drops Lightning's "Tip: ... try installing ..." messages."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Tip:" not in str(record.msg)[:8]


def configure(multirun: bool) -> None:
    """Install the filter; in a multirun route Lightning's loggers and Python warnings to the job's log file alone."""
    for name in RANK_ZERO:
        logger = logging.getLogger(name)
        if not any(isinstance(f, NoAdvertising) for f in logger.filters):
            logger.addFilter(NoAdvertising())
    if not multirun:
        return
    files = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]  # Hydra's train.log
    logging.captureWarnings(True)
    for name in QUIET_IN_SWEEPS:
        logger = logging.getLogger(name)
        logger.handlers, logger.propagate = list(files), False
