"""The tail every console script shares: the pre-flight stage, then the command, inside the command's hold on the
process (:mod:`attnexp.cli.command`); bad input and Ctrl-C end the same way whichever command it is."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from attnexp.cli import command
from attnexp.errors import EXIT_CODES, AttnexpError, explain


def run(name: str, check: Callable[[], Any], main: Callable[[], Any], prefix: str = "", stopped: str = "") -> None:
    """``check`` (bad input: one paragraph after ``prefix``, else the command's ``name``; exit status 2, nothing run),
    then ``main``; a Ctrl-C that reaches here (a second one, which stops at once) exits with the interrupted status,
    ``stopped`` said first. Whatever the command changes in the process is put back when it returns."""
    with command.held(name):
        try:
            check()
        except AttnexpError as err:
            command.refuse(f"{prefix or name}: {explain(err)}")
            raise SystemExit(EXIT_CODES["bad_input"]) from None
        try:
            main()
        except KeyboardInterrupt:
            if stopped:
                print(stopped, file=sys.stderr)
            raise SystemExit(EXIT_CODES["interrupted"]) from None
