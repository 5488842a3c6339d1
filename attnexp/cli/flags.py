"""The flags of a command line (``--multirun``, ``--cfg job``), read by Hydra's own parser before anything else: a flag
Hydra does not have, or a value a flag does not take, refused in one paragraph with the nearest flag, where Hydra's
parser would print its usage."""

from __future__ import annotations

import re
from collections.abc import Sequence

from attnexp.cli.typos import NOTHING, near
from attnexp.errors import AttnexpError


def check_flags(args: Sequence[str]) -> None:
    """Every flag one of Hydra's, with the values it takes, read by Hydra's own parser of its command line (the one
    its app runs, which would print its usage instead of a paragraph); a flag it does not have named with the nearest
    one it has."""
    import argparse

    from hydra._internal.utils import get_args_parser  # Hydra's app's parser: it has no public way to it

    parser = get_args_parser()
    parser.exit_on_error = False  # a value it refuses raised, not printed with the usage
    try:
        _, unknown = parser.parse_known_args(list(args))
    except argparse.ArgumentError as err:
        raise AttnexpError(
            f"The command line cannot be read: {' '.join(str(err).split())}. --help lists the flags and what they "
            f"take. {NOTHING}"
        ) from None
    flags = [a for a in unknown if a.startswith("-")]
    if not flags:
        return
    known = re.findall(r"\[(--?[\w-]+)", parser.format_usage())
    close = near(flags[0].split("=", 1)[0], known)
    hint = f"Did you mean {close[0]}? " if close else ""
    raise AttnexpError(
        f"{flags[0]} is not a flag of the command. {hint}Its flags are {', '.join(known)} (--help says what each "
        f"does); every other argument is key=value. {NOTHING}"
    )
