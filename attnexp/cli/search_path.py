"""Where the commands find configs and the code they name: attnexp's own config groups, then the user's (a
``configs/`` folder in the working directory, installed packages under the entry-point group ``attnexp.configs``,
``hydra.searchpath``), put on Hydra's search path by the plugin in ``hydra_plugins`` (docs/configuration.md). The folder
holding a user's ``configs/`` is importable, so ``_target_: mine.MyAttention`` finds ``mine.py`` beside it."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from attnexp.build import config_dir


def working_configs(cwd: Path | None = None) -> Path | None:
    """The ``configs/`` folder of the working directory (``cwd``, else this process's), unless it is attnexp's own (a
    run from the repository)."""
    folder = (cwd or Path.cwd()) / "configs"
    return folder.resolve() if folder.is_dir() and folder.resolve() != config_dir().resolve() else None


def add_import_folders(searchpath: Iterable[str] = (), run_cwd: str | None = None) -> list[Path]:
    """Make the folders whose modules a user's configs name importable, after every other entry of ``sys.path`` (so
    they shadow no installed module), and return them: each that holds a user's ``configs/`` folder on the search path
    (``searchpath``: ``hydra.searchpath``'s ``file://`` entries) or in the working directory (``run_cwd``: a finished
    run's, else this process's)."""
    folders = [Path(p.removeprefix("file://")).resolve().parent for p in searchpath if str(p).startswith("file://")]
    cwd = Path(run_cwd) if run_cwd else Path.cwd()
    if working_configs(cwd):
        folders.insert(0, cwd.resolve())
    folders = list(dict.fromkeys(folders))
    sys.path.extend(str(f) for f in folders if str(f) not in sys.path)
    return folders
