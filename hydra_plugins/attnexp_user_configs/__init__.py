"""attnexp's Hydra plugin, found by Hydra's plugin discovery in the ``hydra_plugins`` namespace: the user's configs on
the search path of attnexp's commands (:mod:`attnexp.cli.search_path`)."""

from __future__ import annotations

import logging
from importlib.metadata import entry_points
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from attnexp.build import config_dir
from attnexp.cli.search_path import add_import_folders, working_configs

PROVIDER = "attnexp user configs"
ENTRY_POINTS = "attnexp.configs"  # the entry-point group of installed config packages


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
