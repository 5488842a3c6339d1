"""Errors that reach the user as one clear paragraph instead of a traceback."""

from __future__ import annotations

# Exit statuses of the ``attnexp`` command.
EXIT_CODES = {"bad_input": 2, "failed": 1, "diverged": 3, "interrupted": 130}


class AttnexpError(Exception):
    """A problem with the user's input or environment, explained in the message."""


class OutOfMemory(AttnexpError):
    """An allocation failed: explained, but a failed run (exit status 1), not bad input (a setting may fit
    elsewhere)."""


class MixerError(AttnexpError):
    """A mixer's own code failed or broke the call contract while it ran (an output of another shape, an exception
    inside it): explained with the mixer's class and where in its code, but a failed run (exit status 1), not bad
    input: the settings may be right and the mixer wrong."""


def divisors(n: int) -> list[int]:
    """The values that divide ``n``: what messages list as allowed patch sizes or head counts."""
    return [d for d in range(1, n + 1) if n % d == 0]


def root_cause(err: BaseException) -> BaseException:
    """Our own explained error in the ``__cause__`` chain, else the innermost exception.

    Hydra wraps errors raised while instantiating; ours may wrap a library's.
    """
    while not isinstance(err, AttnexpError) and err.__cause__ is not None:
        err = err.__cause__
    return err


def is_bad_input(err: BaseException) -> bool:
    """An error caused by the user's config or files rather than by training."""
    cause = root_cause(err)
    return isinstance(cause, (AttnexpError, ValueError, TypeError)) and not isinstance(cause, (OutOfMemory, MixerError))


def explain(err: BaseException) -> str:
    """One paragraph for the user: the innermost message, with its kind when it is not ours."""
    cause = root_cause(err)
    text = " ".join(str(cause).split()) or type(cause).__name__
    if isinstance(cause, AttnexpError):
        return text
    return f"{type(cause).__name__}: {text}"
