"""A run that stopped on an error inside a mixer: explained with the mixer's class and the line of its code that
raised, and every failure's traceback kept in the run's train.log."""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path

from attnexp.errors import AttnexpError, MixerError, root_cause


def explain_mixer_failure(err: BaseException) -> BaseException:
    """An error raised inside a mixer while it ran, as a :class:`MixerError` that names the mixer and where it was
    raised (a failed run, exit status 1, whatever the error's type); any other error as it is."""
    cause = root_cause(err)
    if isinstance(cause, AttnexpError) or "torch" not in sys.modules:  # no mixer has run before torch is imported
        return err
    from attnexp.mixers.faults import raised_in_mixer

    origin = raised_in_mixer(cause) or raised_in_mixer(err)
    if origin is None:
        return err
    text = " ".join(str(cause).split()) or "(no message)"
    explained = MixerError(f"the mixer {origin.mixer} raised {type(cause).__name__}: {text} (at {origin.file}:{origin.line}, "
                           f"in {origin.function}).")
    explained.__cause__ = err
    return explained


def log_file() -> Path | None:
    """The run's train.log (Hydra's file handler on the root logger), or None."""
    files = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    return Path(files[0].baseFilename) if files else None


def keep_traceback(err: BaseException) -> None:
    """Write ``err``'s traceback to train.log only (the console keeps its one paragraph)."""
    logger = logging.getLogger("attnexp.traceback")
    text = "".join(traceback.format_exception(err)).rstrip()
    record = logger.makeRecord(logger.name, logging.ERROR, __file__, 0, text, None, None)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)
