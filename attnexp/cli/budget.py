"""``ATTNEXP_BUDGET=NAME``: every ``attnexp`` and ``attnexp-check`` command runs as if ``+budget=NAME`` ended it (an
option of configs/budget/, e.g. ``smoke``), so a documented command can be tried end to end on a small budget as it
is written (docs/configuration.md)."""

from __future__ import annotations

import os
from collections.abc import Iterable

ENV = "ATTNEXP_BUDGET"


def with_budget(args: Iterable[str]) -> list[str]:
    """``args`` with ``+budget=NAME`` added when :data:`ENV` names one and the command names none."""
    args, name = list(args), os.environ.get(ENV, "").strip()
    if not name or any(a.lstrip("+~").startswith("budget=") for a in args):
        return args
    return [*args, f"+budget={name}"]
