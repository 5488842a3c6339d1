"""How a run that stopped is explained and recorded in its metrics.json (through its :class:`RunRecord`): an error
inside a mixer named with the line of its code that raised, an allocation that failed with what to lower, and every
failure's traceback kept in the run's train.log."""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path

from omegaconf import DictConfig

from attnexp import build
from attnexp.cli import report
from attnexp.errors import explain, is_bad_input, is_out_of_memory, out_of_memory, root_cause
from attnexp.runs import metrics_file
from attnexp.runs.record import RunRecord


def stopped(cfg: DictConfig, err: BaseException, record: RunRecord) -> str:
    """Explain and record how a run stopped; return its status. The record says it (the folder's record of another
    process is left as it was), the console gets one paragraph, train.log the traceback of a failure."""
    raised, err = err, explained(cfg, err)
    if isinstance(raised, (KeyboardInterrupt, SystemExit)):
        status, error = metrics_file.INTERRUPTED, report.INTERRUPTED
    else:
        status, error = (metrics_file.BAD_INPUT if is_bad_input(err) else metrics_file.FAILED), explain(err)
    if record.fields.get("status") == metrics_file.DIVERGED:  # said by the record keeper, with the step
        status, error = metrics_file.DIVERGED, record.fields.get("error", error)
    if record.ours():
        record.write(status=status, error=error)
    logs = log_file() if status == metrics_file.FAILED else None
    if report.is_multirun() and status == metrics_file.INTERRUPTED:
        logging.getLogger("attnexp").info(report.result_line(record.folder)[0])
    else:
        logging.getLogger("attnexp").error(report.failure(status, explain(err), logs))
    if status != metrics_file.INTERRUPTED:
        keep_traceback(raised)
    return status


def explained(cfg: DictConfig, err: BaseException) -> BaseException:
    """``err`` as the user reads it: a failed allocation or an error inside a mixer explained, any other as it is."""
    cause = root_cause(err)
    if is_out_of_memory(cause):
        return out_of_memory(cfg, cause, build.parameter_count(cfg))
    if "torch" not in sys.modules:  # no mixer has run before torch is imported
        return err
    from attnexp.mixers.faults import explain_mixer_failure

    return explain_mixer_failure(err)


def log_file() -> Path | None:
    """The run's train.log (Hydra's file handler on the root logger), or None."""
    files = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    return Path(files[0].baseFilename) if files else None


def keep_traceback(err: BaseException) -> None:
    """Write ``err``'s traceback to train.log only (the console keeps its one paragraph)."""
    logger = logging.getLogger("attnexp.traceback")
    text = "".join(traceback.format_exception(err)).rstrip()
    record = logger.makeRecord(logger.name, logging.ERROR, __file__, 0, text, (), None)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)
