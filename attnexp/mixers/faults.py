"""Where an error raised inside a mixer comes from: the mixer's class and the line of code, in the user's module
or attnexp's, that raised it, so that a run or the conformance kit can point there instead of at torch's internals."""

from __future__ import annotations

import sysconfig
import traceback
from pathlib import Path
from types import FrameType
from typing import NamedTuple

import torch

from attnexp.errors import AttnexpError, MixerError, root_cause
from attnexp.mixers.contract import is_mixer, shown

# Frames in these folders are torch's or Python's own: the line to point at is the last one outside them.
LIBRARIES = (Path(torch.__file__).parent, Path(sysconfig.get_paths()["stdlib"]))


class Origin(NamedTuple):
    """The mixer an error was raised in, and the line that raised it."""

    mixer: str  # its class
    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.mixer}, at {self.file}:{self.line} in {self.function}"


def raised_in_mixer(err: BaseException) -> Origin | None:
    """Where an error raised while a mixer ran (not while it was built) comes from: the mixer, and the innermost line
    of its call outside torch and the standard library; None for an error raised elsewhere."""
    frames = list(traceback.walk_tb(err.__traceback__))
    start = next(
        (i for i, (frame, _) in enumerate(frames) if frame.f_code.co_name != "__init__" and is_mixer(owner(frame))),
        None,
    )
    if start is None:
        return None
    inside = [(f, line) for f, line in frames[start:] if not in_library(Path(f.f_code.co_filename))]
    frame, line = inside[-1] if inside else frames[start]
    return Origin(
        type(owner(frames[start][0])).__name__, shown(Path(frame.f_code.co_filename)), line, frame.f_code.co_name
    )


def explain_mixer_failure(err: BaseException) -> BaseException:
    """An error raised inside a mixer while it ran, as a :class:`MixerError` that names the mixer and where it was
    raised (a failed run, exit status 1, whatever the error's type); any other error as it is."""
    cause = root_cause(err)
    origin = None if isinstance(cause, AttnexpError) else raised_in_mixer(cause) or raised_in_mixer(err)
    if origin is None:
        return err
    text = " ".join(str(cause).split()) or "(no message)"
    explained = MixerError(
        f"the mixer {origin.mixer} raised {type(cause).__name__}: {text} (at {origin.file}:"
        f"{origin.line}, in {origin.function})."
    )
    explained.__cause__ = err
    return explained


def owner(frame: FrameType) -> object:
    """The object a frame's method runs on (its ``self``), or None."""
    return frame.f_locals.get("self")


def in_library(path: Path) -> bool:
    return any(path.is_relative_to(root) for root in LIBRARIES)
