"""``ATTNEXP_BUDGET=NAME``: every ``attnexp`` and ``attnexp-check`` command runs on the budget of
``configs/budget/NAME.yaml`` (e.g. ``smoke``), whose keys are added after the command's own, so they win over a
budget the command sets (``trainer.max_epochs=10``): a documented command is tried end to end as it is written, in
seconds (docs/configuration.md). ``+budget=NAME`` on a command line is the same config group, under the command's own
values."""

from __future__ import annotations

import os
from collections.abc import Iterable

from omegaconf import OmegaConf

from attnexp import config_dir
from attnexp.errors import AttnexpError
from attnexp.runs.settings import flat

ENV = "ATTNEXP_BUDGET"


def with_budget(args: Iterable[str]) -> list[str]:
    """``args`` with the keys of the budget :data:`ENV` names added after its last override (before flags that
    follow it, such as ``--cfg job``); ``args`` as they are when it names none."""
    args, name = list(args), os.environ.get(ENV, "").strip()
    if not name:
        return args
    file = config_dir() / "budget" / f"{name}.yaml"
    if not file.is_file():
        known = ", ".join(sorted(p.stem for p in file.parent.glob("*.yaml")))
        raise AttnexpError(f"{ENV}={name} names no budget: the budgets are {known} (configs/budget/).")
    keys = [f"{key}={value}" for key, value in flat(OmegaConf.to_container(OmegaConf.load(file))).items()]
    last = max((i for i, a in enumerate(args) if "=" in a and not a.startswith("-")), default=-1)
    return [*args[: last + 1], *keys, *args[last + 1 :]]
