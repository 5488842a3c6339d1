"""The tail every console script shares: the pre-flight stage, then the command; bad input and Ctrl-C end the same
way whichever command it is."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from attnexp.errors import EXIT_CODES, AttnexpError, explain


def run(prefix: str, check: Callable[[], Any], main: Callable[[], Any], stopped: str = "") -> None:
    """``check`` (bad input: one paragraph after ``prefix``, exit status 2, nothing run), then ``main``; a Ctrl-C that
    reaches here (a second one, which stops at once) exits with the interrupted status, ``stopped`` said first."""
    try:
        check()
    except AttnexpError as err:
        print(f"{prefix}: {explain(err)}", file=sys.stderr)
        raise SystemExit(EXIT_CODES["bad_input"]) from None
    try:
        main()
    except KeyboardInterrupt:
        if stopped:
            print(stopped, file=sys.stderr)
        raise SystemExit(EXIT_CODES["interrupted"]) from None
