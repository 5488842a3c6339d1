"""Where the commands find configs and the code they name: attnexp's own config groups, then the user's (a
``configs/`` folder in the working directory, installed packages under the entry-point group ``attnexp.configs``,
``hydra.searchpath``). The folder holding a user's ``configs/`` is importable, so ``_target_: mine.MyAttention`` finds
``mine.py`` beside it.

attnexp's entrypoints :func:`register` :class:`UserConfigs` with Hydra themselves (``Plugins.register``, Hydra's public
call for it) rather than leaving it to Hydra's discovery, which walks the ``hydra_plugins`` namespace package: an
editable install (PEP 660's import finder) cannot be walked, so a plugin there is never found (docs/design.md)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.plugins import Plugins
from hydra.plugins.search_path_plugin import SearchPathPlugin

from attnexp import config_dir

PROVIDER = "attnexp user configs"
ENTRY_POINTS = "attnexp.configs"  # the entry-point group of installed config packages


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


def user_search_path() -> list[str]:
    """The search path entries of the user's configs: the working directory's, then the installed packages'."""
    local = working_configs()
    found = [local.as_uri()] if local else []
    return found + [f"pkg://{ep.value}" for ep in sorted(entry_points(group=ENTRY_POINTS), key=lambda ep: ep.name)]


def hidden_options(folder: Path) -> list[str]:
    """The options in a user's ``configs/`` folder that attnexp's own of the same name hide (``model/dot``)."""
    own = config_dir()
    return sorted(
        p.relative_to(folder).with_suffix("").as_posix()
        for p in folder.rglob("*.yaml")
        if (own / p.relative_to(folder)).is_file()
    )


class UserConfigs(SearchPathPlugin):
    """Adds the user's configs to the search path of attnexp's commands (after attnexp's own) and makes the working
    directory's user folder importable; other Hydra apps in the same process are left alone."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        own = config_dir().resolve()
        if not any(
            e.provider == "main" and Path(e.path.removeprefix("file://")).resolve() == own
            for e in search_path.get_path()
        ):
            return
        for entry in user_search_path():
            search_path.append(PROVIDER, entry)
        add_import_folders()
        local = working_configs()
        hidden = hidden_options(local) if local else []
        if hidden:  # a mixer of one's own named like a built-in one would run the built-in under its name
            logging.getLogger("attnexp").warning(
                f"{', '.join(f'{local}/{h}.yaml' for h in hidden)}: "
                "attnexp has options of these names, and its own are "
                "used. Rename yours (e.g. configs/model/mine.yaml) to use them."
            )


def register() -> None:
    """Put :class:`UserConfigs` among Hydra's plugins (once: Hydra keeps a class once), before anything composes."""
    Plugins.instance().register(UserConfigs)
