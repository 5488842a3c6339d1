"""The commands as Python calls, for a notebook or a script: ``attnexp.run(["model=dot", "seed=1"])`` does what
``attnexp model=dot seed=1`` does in a shell (the same pre-flight stage, folders, record and console lines) and hands
back what it made. Each call holds the process only while it runs (:mod:`attnexp.cli.command`): a second call after a
mixer's file is edited, or with other settings, gets what a fresh process would."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from attnexp.cli import command
from attnexp.errors import EXIT_CODES, CommandFailed
from attnexp.runs import metrics_file


def run(args: Sequence[str] = ()) -> dict[str, Any] | list[dict[str, Any]] | None:
    """``attnexp ARGS``: the run's record (its ``metrics.json`` as a dict: settings, identity, status, metrics); with
    ``--multirun`` the list of its jobs' records; None for a command that trains nothing (``--cfg job``, ``--help``).
    A run that failed, diverged or is invalid is returned: its record's ``status`` says so."""
    from attnexp.cli import train

    held, _ = called(train.cli, "attnexp", args)
    records = [metrics_file.read(folder) for folder in runs_of(held)]
    return records if held.sweeps else (records[0] if records else None)


def check(args: Sequence[str] = ()) -> dict[str, Any] | None:
    """``attnexp-check ARGS``: ``{"passed", "checks": [{"name", "ok", "measured"}, ...], "lines"}`` (``ok`` None: the
    check does not apply), a failed check included; None for ``--help`` and ``--cfg``."""
    from attnexp.cli import check as kit

    return called(kit.cli, "attnexp-check", args)[0].result


def compare(args: Sequence[str]) -> Any:
    """``attnexp-compare ARGS``: the :class:`attnexp.comparison.summary.Comparison` it printed and wrote (its tables,
    rows with each metric's mean, interval, difference and verdict, and its warnings)."""
    from attnexp.cli import compare as comparison

    return called(comparison.cli, "attnexp-compare", args)[0].result


def predict(args: Sequence[str]) -> str | None:
    """``attnexp-predict ARGS``: the text it printed."""
    from attnexp.cli import predict as prediction

    return called(prediction.cli, "attnexp-predict", args)[0].result


def called(entry: Callable[[], Any], name: str, args: Sequence[str]) -> tuple[command.Command, int]:
    """The console script ``entry`` run with ``args`` in this process, and its exit status. Bad input, and a failure
    that gave nothing back, raise :class:`CommandFailed` with the paragraph the command printed; Ctrl-C raises
    KeyboardInterrupt."""
    with command.held(name, [name, *map(os.fspath, args)]) as held:
        try:
            entry()
            status = 0
        except SystemExit as ended:
            status = ended.code if isinstance(ended.code, int) else int(ended.code is not None)
    if status == EXIT_CODES["interrupted"]:
        raise KeyboardInterrupt
    if status == EXIT_CODES["bad_input"] or (status and held.result is None and not held.runs and not held.sweeps):
        raise CommandFailed(held.error or f"{name} ended with exit status {status}; its output says why.", status)
    return held, status


def runs_of(held: command.Command) -> list[Path]:
    """The run folders a command trained or found finished, then those its sweeps' jobs linked (jobs of other
    processes), each once."""
    found = list(held.runs)
    for sweep in held.sweeps:
        for top, _, files in sorted(os.walk(sweep, followlinks=True)):
            if metrics_file.FILE in files and Path(top).resolve() not in {f.resolve() for f in found}:
                found.append(Path(top))
    return found
