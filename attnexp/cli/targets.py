"""Before any run folder exists: every class a config names can be found (else the folders Python looked in and the
fix), and a mixer runs under its own name (no ``model._target_`` override). attnexp's modules and its libraries are
looked up, not imported, so a bad value elsewhere is still explained before torch is imported."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from attnexp.cli.search_path import add_import_folders
from attnexp.errors import AttnexpError
from attnexp.runs.settings import targets

# attnexp and the libraries its own configs name: found, not imported (importing torch here would slow every start)
LOOKED_UP = {"attnexp", "torch", "pytorch_lightning", "lightning", "torchmetrics", "torchvision", "optuna"}
RECIPE = (
    "Give the mixer a name of its own: write configs/model/NAME.yaml in the folder you run attnexp from, holding "
    "'_target_: {target}' and '_partial_: true' (and its options), then run attnexp model=NAME; the README's "
    "section 'Your own mixer' shows it end to end."
)


def searched(folders: list[Path]) -> str:
    """The folders Python looks in for a module, the user's first."""
    own = [f"{f} (holds a configs/ folder)" for f in folders]
    rest = [p or "the working directory" for p in sys.path if p not in {str(f) for f in folders}]
    return "; ".join(own + rest)


def explain_target(where: str, target: str, folders: list[Path]) -> str | None:
    """Why ``target`` (named by the config key ``where``) cannot be loaded, with the fix; None when it can."""
    top = target.split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return (
            f"{where}._target_ names {target}, but Python finds no module {top!r}. It looked in: {searched(folders)}. "
            f"Put {top}.py (or the package {top}/) beside the configs/ folder you run attnexp from (that folder is "
            f"importable), install the package that provides it (pip install ...), or add its folder to PYTHONPATH. "
            "Nothing was run or written."
        )
    if top in LOOKED_UP:
        return None
    origin = f"{top} ({spec.origin})" if spec.origin else top  # the file, for the message
    try:
        obj = importlib.import_module(top)
        for part in target.split(".")[1:]:
            if not hasattr(obj, part):  # a submodule not imported yet, or a name the module lacks
                if not hasattr(obj, "__path__") or importlib.util.find_spec(f"{obj.__name__}.{part}") is None:
                    module = origin if obj.__name__ == top else obj.__name__
                    return (
                        f"{where}._target_ names {target}, but {module} has no {part!r}. Fix the _target_ or the "
                        "module. Nothing was run or written."
                    )
                importlib.import_module(f"{obj.__name__}.{part}")
            obj = getattr(obj, part)
    except Exception as err:  # the module is there, but importing it fails
        return (
            f"{where}._target_ names {target}, found in {origin}, but importing it failed: {type(err).__name__}: "
            f"{' '.join(str(err).split())}. Fix the module, or install what it imports. Nothing was run or written."
        )
    return None


def check_targets(cfg: DictConfig, searchpath: list[str], overrides: list[str]) -> None:
    """Raise :class:`AttnexpError` for a config that names a class that cannot be loaded, or for a ``model._target_``
    override. ``searchpath``, ``overrides``: Hydra's ``hydra.searchpath`` and ``hydra.overrides.task``."""
    folders = add_import_folders(searchpath)
    for override in map(str, overrides):
        key, _, value = override.lstrip("+~").partition("=")
        if key == "model._target_":
            raise AttnexpError(
                f"{override} is refused: it would run that class under the name of the model option "
                "(model=dot unless set), so its run folder, metrics.json, HParams and every summary would "
                "call it by that name, and a comparison with dot could compare dot with dot by name. "
                + RECIPE.format(target=value or "your.module.Class")
            )
    plain = OmegaConf.to_container(OmegaConf.masked_copy(cfg, [str(k) for k in cfg if k != "hydra"]), resolve=False)
    for reason in (explain_target(where, target, folders) for where, target in targets(plain)):
        if reason:
            raise AttnexpError(reason)
