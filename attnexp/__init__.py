"""attnexp: a command-line experiment runner for comparing attention mechanisms.

Role packages: the mixers, the networks around them, the tasks, the data and the figures (the research core, beside
three foundation modules: ``errors``, ``rules``, ``tokens``); ``runs`` (what a run is and writes: its identity,
settings, folder and record); ``training`` (the LightningModule and the callbacks of a run); ``comparison``; and
``cli``, the commands (docs/design.md)."""

from __future__ import annotations

from pathlib import Path


def config_dir() -> Path:
    """attnexp's own config groups: ``attnexp/configs`` in an installed wheel, else the repository's ``configs/``."""
    package = Path(__file__).resolve().parent
    return package / "configs" if (package / "configs").is_dir() else package.parent / "configs"
