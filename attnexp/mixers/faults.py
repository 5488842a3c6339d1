"""Where an error raised inside a mixer comes from: the mixer's class and the line of code, in the user's module
or attnexp's, that raised it, while the mixer was built or while it ran, so that a run or the conformance kit can
point there instead of at torch's internals or at the network that built it.

An error a mixer raises on purpose (:class:`~attnexp.errors.AttnexpError`: a request it refuses, an option out of
range) and an option it does not take (``TypeError: ... unexpected keyword argument``) are what the user typed:
bad input. Any other error inside a mixer, a ``ValueError`` of its constructor included, is a bug in its code: a
failed run (:class:`~attnexp.errors.MixerError`, exit status 1, the traceback kept)."""

from __future__ import annotations

import traceback
from types import FrameType

from torch import nn

from attnexp.errors import AttnexpError, MixerError, root_cause
from attnexp.mixers.contract import make_mixer
from attnexp.mixers.frames import Origin, origin, owner
from attnexp.mixers.request import is_mixer

MISSPELT = "unexpected keyword argument"  # Python's TypeError for an option a constructor does not take


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
