"""Errors that reach the user as one clear paragraph instead of a traceback."""

from __future__ import annotations

import errno
import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

# Exit statuses of the ``attnexp`` command.
EXIT_CODES = {"bad_input": 2, "failed": 1, "invalid": 1, "diverged": 3, "interrupted": 130}
LONGEST = 240  # characters of one word of a message shown whole; a longer one shows its first 60 and last 30


class AttnexpError(Exception):
    """A problem with the user's input or environment, explained in the message."""


class OutOfMemory(AttnexpError):
    """An allocation failed: explained, but a failed run (exit status 1), not bad input (a setting may fit
    elsewhere)."""


class DiskFull(AttnexpError):
    """A write found no space: explained, but a failed run (exit status 1): ``resume=true`` continues once there is."""


class MixerError(AttnexpError):
    """A mixer's own code failed or broke the call contract while it ran (an output of another shape, an exception
    inside it): explained with the mixer's class and where in its code, but a failed run (exit status 1), not bad
    input: the settings may be right and the mixer wrong."""


class CommandFailed(AttnexpError):
    """A command called from Python (``attnexp.run``, ...) refused its input or failed before it made anything: the
    paragraph it printed, and the exit status the console script would have ended with."""

    def __init__(self, paragraph: str, status: int) -> None:
        super().__init__(paragraph)
        self.status = status


def shown(path: str | Path) -> str:
    """``path`` as the user would type it: relative to the current folder when inside it."""
    path = Path(path).absolute()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


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
    failed = (OutOfMemory, MixerError, DiskFull)
    return isinstance(cause, (AttnexpError, ValueError, TypeError)) and not isinstance(cause, failed)


def explain(err: BaseException) -> str:
    """One paragraph for the user: the innermost message, with its kind when it is not ours, long words shortened."""
    cause = root_cause(err)
    text = shortened(" ".join(str(cause).split()) or type(cause).__name__)
    if isinstance(cause, AttnexpError):
        return text
    return f"{type(cause).__name__}: {text}"


def shortened(text: str) -> str:
    """``text`` with each word longer than :data:`LONGEST` (a 5,000-character value echoed back) cut to its start and
    end around an ellipsis: a message stays a paragraph. Paths are shorter, and stay whole."""
    return re.sub(rf"\S{{{LONGEST + 1},}}", lambda m: f"{m[0][:60]}...{m[0][-30:]}", text)


def is_disk_full(err: BaseException) -> bool:
    """A write that found no space: ENOSPC anywhere in the chain, or torch's own words for it."""
    while err is not None:
        if (isinstance(err, OSError) and err.errno == errno.ENOSPC) or "file write failed" in str(err):
            return True
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    return False


def is_out_of_memory(cause: BaseException) -> bool:
    """A failed allocation: Python's MemoryError, torch's CUDA or MPS out of memory, or its CPU allocator's refusal."""
    text = str(cause).lower()
    return (
        isinstance(cause, MemoryError)
        or type(cause).__name__ == "OutOfMemoryError"
        or "out of memory" in text
        or "can't allocate memory" in text
    )


def out_of_memory(cfg: DictConfig, cause: BaseException, params: int | None) -> OutOfMemory:
    """The paragraph for an allocation that failed: the model's size, the batch, the device, and what to lower."""
    text = " ".join(str(cause).split())
    device = (
        "the GPU" if "cuda" in text.lower() or type(cause).__name__ == "OutOfMemoryError" else "the CPU (main memory)"
    )
    asked = re.search(r"allocate (\d+) bytes", text) or re.search(r"[Tt]ried to allocate ([\d.]+ [KMGT]iB)", text)
    size = "" if asked is None else f" {int(asked[1]) / 2**30:.2f} GiB" if asked[1].isdigit() else f" {asked[1]}"
    model = (
        (
            f"{params:,} parameters ({params * 4 / 2**30:.2f} GiB as float32; training with Adam keeps about 4 times "
            "that)"
        )
        if params
        else "a size that could not be counted"
    )
    batch = OmegaConf.select(cfg, "data.batch_size", default="?")
    devices = OmegaConf.select(cfg, "trainer.devices", default=1)
    keys = [
        f"{k}={OmegaConf.select(cfg, k)}"
        for k in ("net.dim", "net.depth", "model.heads")
        if OmegaConf.select(cfg, k, default=None) is not None
    ]
    return OutOfMemory(
        f"Out of memory on {device}: an allocation of{size or ' memory'} failed. The model has {model} and trains on "
        f"batches of {batch}{f' on each of {devices} devices' if devices not in (1, '1', 'auto') else ''}"
        f"{' (' + ', '.join(keys) + ')' if keys else ''}. Lower data.batch_size (data.eval_batch_size for validation "
        "and test), net.dim or net.depth; trainer.precision=bf16-mixed halves the activations; a sweep on one machine "
        "can run fewer jobs at once (hydra.launcher.n_jobs=1)."
    )
