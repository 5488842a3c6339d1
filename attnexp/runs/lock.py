"""One writer per run folder: an advisory lock (``fcntl.flock``) on the folder's ``.lock`` file, taken by the process
that trains there before it writes anything and held until its run ends (:func:`holding`). The kernel drops it when the
process ends, however it ends, so ``kill -9`` leaves no stale lock; a second start of the same run finds it taken and
is refused, or in a sweep skipped, naming the process that holds it."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

FILE = ".lock"
HELD: dict[Path, IO[str]] = {}  # this process's locks, by folder: a lock lasts as long as its file stays open


class Busy(Exception):
    """The folder's lock is held by another process (``pid``, when it said)."""

    def __init__(self, folder: Path, pid: int | None) -> None:
        super().__init__(f"{folder} is being trained by process {pid or '?'}")
        self.folder, self.pid = folder, pid


@contextlib.contextmanager
def holding(folder: str | Path) -> Iterator[None]:
    """``folder``'s lock for the time of a block (:class:`Busy` when another process holds it): a run's, from before it
    writes until it ends. A lock this process held already stays held after the block."""
    folder = Path(folder).absolute()
    before = folder in HELD
    take(folder)
    try:
        yield
    finally:
        if not before:
            release(folder)


def take(folder: str | Path) -> None:
    """Hold ``folder``'s lock from now until :func:`release` or this process ends (:class:`Busy` when another process
    holds it); the folder is made if need be."""
    folder = Path(folder).absolute()
    if folder in HELD:
        return
    folder.mkdir(parents=True, exist_ok=True)
    # held open until the process ends: the lock lasts as long as the file stays open
    file = open(folder / FILE, "a+")  # noqa: SIM115
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.close()
        raise Busy(folder, holder(folder)) from None
    try:  # unbuffered: a full disk fails here, and leaves nothing to flush at close
        file.truncate(0)
        os.write(file.fileno(), f"{os.getpid()}\n".encode())
    except OSError:
        file.close()
        raise
    HELD[folder] = file


def release(folder: str | Path) -> None:
    file = HELD.pop(Path(folder).absolute(), None)
    if file is not None:
        file.close()  # the kernel drops the lock with the last open file


def held() -> set[Path]:
    """The folders whose locks this process holds."""
    return set(HELD)


def release_all(keep: set[Path]) -> None:
    """Release every lock this process holds but those of ``keep``."""
    for folder in held() - keep:
        release(folder)


def holder(folder: str | Path) -> int | None:
    """The other process that holds ``folder``'s lock (its number, 0 if it did not say), or None when none does (this
    one may), or the folder has no lock file (a run recorded before locks:
    :func:`attnexp.runs.metrics_file.current_status` asks the process table then)."""
    path = Path(folder) / FILE
    if Path(folder).absolute() in HELD:
        return None
    try:
        file = open(path)  # noqa: SIM115 (closed by the with below, after the check)
    except FileNotFoundError:
        return None
    with file:
        try:
            fcntl.flock(file, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = file.read().strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(file, fcntl.LOCK_UN)
        return None


def has_lock_file(folder: str | Path) -> bool:
    return (Path(folder) / FILE).is_file()
