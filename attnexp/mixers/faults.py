"""Where an error raised inside a mixer comes from: the mixer's class and the line of code, in the user's module
or attnexp's, that raised it, while the mixer was built or while it ran, so that a run or the conformance kit can
point there instead of at torch's internals or at the network that built it.

An error a mixer raises on purpose (:class:`~attnexp.errors.AttnexpError`: a request it refuses, an option out of
range) and an option it does not take (``TypeError: ... unexpected keyword argument``) are what the user typed:
bad input. Any other error inside a mixer, a ``ValueError`` of its constructor included, is a bug in its code: a
failed run (:class:`~attnexp.errors.MixerError`, exit status 1, the traceback kept)."""

from __future__ import annotations

import sysconfig
import traceback
from pathlib import Path
from types import FrameType
from typing import NamedTuple

import torch
from torch import nn

from attnexp.errors import AttnexpError, MixerError, root_cause
from attnexp.mixers.contract import is_mixer, make_mixer, shown

# Frames in these folders are torch's or Python's own: the line to point at is the last one outside them.
LIBRARIES = (Path(torch.__file__).parent, Path(sysconfig.get_paths()["stdlib"]))
PACKAGE = Path(__file__).resolve().parents[1]  # attnexp/: a line of the user's code is preferred to one of attnexp's
INSTALLED = tuple({Path(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")})  # and to an installed helper's
MISSPELT = "unexpected keyword argument"  # Python's TypeError for an option a constructor does not take


class Origin(NamedTuple):
    """The mixer an error was raised in, the line that raised it, and whether the mixer was being built."""

    mixer: str  # its class
    file: str
    line: int
    function: str
    building: bool = False

    def __str__(self) -> str:
        return f"{self.mixer}, at {self.file}:{self.line} in {self.function}"


def raised_in_mixer(err: BaseException) -> Origin | None:
    """Where an error raised inside a mixer comes from: the mixer, and the innermost line of its code outside torch and
    the standard library; None for an error raised elsewhere. Inside its constructor (the call :func:`make_mixer`
    makes, however deep in a network's) the mixer is the object being built; else the first mixer whose method is
    running."""
    frames = list(traceback.walk_tb(err.__traceback__))
    built = next((i for i, (frame, _) in enumerate(frames) if frame.f_code is make_mixer.__code__), None)
    if built is not None and built + 1 < len(frames):
        return origin(frames[built + 1 :], name_built(frames[built:]), building=True)
    start = next(
        (i for i, (frame, _) in enumerate(frames) if frame.f_code.co_name != "__init__" and is_mixer(owner(frame))),
        None,
    )
    if start is None:
        return None
    return origin(frames[start:], type(owner(frames[start][0])).__name__)


def origin(frames: list[tuple[FrameType, int]], mixer: str, building: bool = False) -> Origin:
    """The innermost of ``frames`` in the user's code (not attnexp's, nor an installed package's, as einops); else
    the innermost outside attnexp, torch and the standard library; else outside the last two; the first when all are
    inside them."""
    inside = [(f, line) for f, line in frames if not in_library(Path(f.f_code.co_filename))]
    others = [(f, line) for f, line in inside if not in_package(Path(f.f_code.co_filename))]
    users = [(f, line) for f, line in others if not under(Path(f.f_code.co_filename), INSTALLED)]
    frame, line = (users or others or inside or frames[:1])[-1]
    return Origin(mixer, shown(Path(frame.f_code.co_filename)), line, frame.f_code.co_name, building)


def name_built(frames: list[tuple[FrameType, int]]) -> str:
    """The class of the mixer being built by the call in ``frames`` (from :func:`make_mixer`'s on): the object the
    first module's method runs on, else what the factory names."""
    built = next((owner(f) for f, _ in frames[1:] if isinstance(owner(f), nn.Module)), None)
    if built is not None:
        return type(built).__name__
    factory = frames[0][0].f_locals.get("factory")
    return str(getattr(getattr(factory, "func", factory), "__name__", factory))


def explain_mixer_failure(err: BaseException) -> BaseException:
    """An error raised inside a mixer, while it was built or while it ran, as a :class:`MixerError` that names the
    mixer and where it was raised (a failed run, exit status 1, whatever the error's type); the mixer's own refusals
    and an option it does not take (bad input), and any error raised elsewhere, as they are."""
    cause = root_cause(err)
    if isinstance(cause, AttnexpError):
        return err
    where = raised_in_mixer(cause) or raised_in_mixer(err)
    if where is None or (where.building and isinstance(cause, TypeError) and MISSPELT in str(cause)):
        return err
    text = " ".join(str(cause).split()) or "(no message)"
    when = " while it was built" if where.building else ""
    explained = MixerError(
        f"the mixer {where.mixer} raised {type(cause).__name__}{when}: {text} (at {where.file}:{where.line}, in "
        f"{where.function})."
    )
    explained.__cause__ = err
    return explained


def owner(frame: FrameType) -> object:
    """The object a frame's method runs on (its ``self``), or None."""
    return frame.f_locals.get("self")


def in_library(path: Path) -> bool:
    return under(path, LIBRARIES)


def under(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


def in_package(path: Path) -> bool:
    """Whether a file is attnexp's own, not the user's."""
    return (path if path.is_absolute() else Path.cwd() / path).resolve().is_relative_to(PACKAGE)
