"""attnexp: a command-line experiment runner for comparing attention mechanisms.

Role packages: the mixers, the networks around them, the tasks, the data and the figures (the research core, beside
three foundation modules: ``errors``, ``rules``, ``tokens``); ``runs`` (what a run is and writes: its identity,
settings, folder and record); ``training`` (the LightningModule and the callbacks of a run); ``comparison``; and
``cli``, the commands (docs/design.md).

The commands as Python calls: ``attnexp.run``, ``check``, ``compare`` and ``predict`` take a command's arguments as a
list and return what it made (:mod:`attnexp.cli.api`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CALLS = ("run", "check", "compare", "predict")  # attnexp.cli.api's, imported when first asked for (PEP 562)


def config_dir() -> Path:
    """attnexp's own config groups: ``attnexp/configs`` in an installed wheel, else the repository's ``configs/``."""
    package = Path(__file__).resolve().parent
    return package / "configs" if (package / "configs").is_dir() else package.parent / "configs"


def __getattr__(name: str) -> Any:
    if name in CALLS:
        from attnexp.cli import api

        return getattr(api, name)
    raise AttributeError(f"module 'attnexp' has no attribute {name!r}")
