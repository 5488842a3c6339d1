"""Where the commands find configs and the code they name: attnexp's own config groups, then the user's.

attnexp's config groups are the repository's ``configs/``; an installed wheel carries them as ``attnexp/configs``.
A user's mixer (or data, net, experiment...) needs no change to attnexp, only Hydra's search path:

- a ``configs/`` folder in the working directory (``configs/model/mine.yaml``, the layout of attnexp's own);
- installed packages that name a config package under the entry-point group ``attnexp.configs``
  (``[project.entry-points."attnexp.configs"] mine = "my_package.configs"``), as pytest finds its plugins;
- ``hydra.searchpath=[file:///some/folder/configs]`` on the command line, Hydra's own way.

The first two are on the search path from the start (a Hydra ``SearchPathPlugin`` in the ``hydra_plugins``
namespace package, where Hydra discovers plugins), so their options appear in ``--help`` beside the built-in ones.
A built-in option keeps its name: a user's file of the same name is hidden, and the commands say so.
The folder that holds a user's ``configs/`` folder is importable, so ``_target_: mine.MyAttention`` finds
``mine.py`` beside it; an installed package is importable anyway.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path

from attnexp.build import config_dir

ENTRY_POINTS = "attnexp.configs"  # the entry-point group of installed config packages


def working_configs(cwd: Path | None = None) -> Path | None:
    """The ``configs/`` folder of the working directory (``cwd``, else this process's), unless it is attnexp's own (a
    run from the repository)."""
    folder = (cwd or Path.cwd()) / "configs"
    return folder.resolve() if folder.is_dir() and folder.resolve() != config_dir().resolve() else None


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
