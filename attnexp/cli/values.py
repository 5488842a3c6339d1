"""The values of a composed config that a run would meet only once it is under way, checked before anything is built:
ranges of the keys no constructor of ours owns, our constructors' rules, one rule for every switch, a search path that
exists, the metric that picks checkpoints; each refused in one paragraph (exit status 2) naming the key."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from attnexp.cli import typos
from attnexp.cli.hardware import cores
from attnexp.cli.typos import NOTHING
from attnexp.errors import AttnexpError
from attnexp.rules import RULES, SEED, Rule, check_value
from attnexp.runs.settings import leaves

CONSTRUCTED = ("net", "data", "module", "task")  # our classes: their rules are applied before torch is imported
COUNT = 2**63 - 1  # the step and epoch counters of TensorBoard's events and torch's tensors are 64-bit integers
RANGES = {  # keys no constructor of ours owns (their types: attnexp.cli.schema)
    "seed": SEED,
    "trainer.max_epochs": Rule(
        int, lambda v: 0 < v <= COUNT or v == -1, f"a positive integer up to {COUNT} (-1: none, with max_steps)", "5"
    ),
    "trainer.max_steps": Rule(
        int, lambda v: 0 < v <= COUNT or v == -1, f"a positive integer up to {COUNT}, or -1 for no limit", "1000"
    ),
    "trainer.check_val_every_n_epoch": Rule(
        int,
        lambda v: v > 0,
        "a positive integer (epochs between validations), or null to validate by trainer.val_check_interval alone",
        "1",
    ),
    "trainer.val_check_interval": Rule(
        float,
        lambda v: v > 0 if isinstance(v, int) else 0 < v <= 1,
        "a positive integer (training batches between validations) or a fraction of an epoch in (0, 1]",
        "0.5",
    ),
    "trainer.min_epochs": Rule(
        int, lambda v: 0 <= v <= COUNT, "an integer >= 0 (epochs trained at least), or null", "1"
    ),
    "trainer.min_steps": Rule(
        int, lambda v: 0 <= v <= COUNT, "an integer >= 0 (steps trained at least), or null", "100"
    ),
    "trainer.num_sanity_val_steps": Rule(
        int, lambda v: v >= -1, "an integer >= -1 (validation batches run before training; 0: none, -1: all)", "2"
    ),
    "trainer.log_every_n_steps": Rule(
        int, lambda v: v >= 0, "an integer >= 0 (optimizer steps between step-level curves; 0: none)", "50"
    ),
    "trainer.accumulate_grad_batches": Rule(int, lambda v: v > 0, "a positive integer", "4"),
    "trainer.gradient_clip_val": Rule(float, lambda v: v > 0, "a positive number, or null for no clipping", "1.0"),
    "trainer.gradient_clip_algorithm": Rule(str, lambda v: v in ("norm", "value"), "'norm' or 'value'", "norm"),
    "module.optimizer.lr": Rule(float, lambda v: 0 < v < math.inf, "a finite positive number such as 3e-3", "3e-3"),
    "module.scheduler.T_max": Rule(  # trainer.max_epochs unless set: -1 when training by trainer.max_steps
        int,
        lambda v: v > 0,
        "a positive integer: the epochs the cosine schedule anneals over (training by trainer.max_steps, the epochs "
        "those steps make; module/scheduler=null drops the schedule)",
        "5",
    ),
}


def check_search_path(parsed: Sequence[Any]) -> None:
    """Each ``hydra.searchpath`` entry given names a folder (``file://``) or a package (``pkg://``) that exists: Hydra
    only warns, and an option looked for there is then said to be missing."""
    import importlib.util

    for override in parsed:
        if override.key_or_group != "hydra.searchpath" or override.is_sweep_override():
            continue
        value = override.value()
        for entry in value if isinstance(value, list) else [value]:
            where = str(entry)
            scheme, _, place = where.partition("://")
            try:
                found = Path(place).is_dir() if scheme == "file" else bool(importlib.util.find_spec(place))
            except (ImportError, ValueError):
                found = False
            if scheme not in ("file", "pkg") or not found:
                what = "a folder" if scheme == "file" else "a package" if scheme == "pkg" else "no place"
                raise AttnexpError(
                    f"hydra.searchpath names {place or where} ({where}), {what} that does not exist here: a search "
                    "path entry is file://FOLDER (relative to the working folder, or absolute) holding config groups "
                    f"as configs/ does, or pkg://PACKAGE. Fix the path, or drop the override (a configs/ folder here "
                    f"is found without it). {NOTHING}"
                )


UNRESOLVED = {"throw_on_resolution_failure": False}  # None for a value that cannot be resolved yet
SWITCH_WORDS = {"yes", "no", "on", "off", "y", "n", "true", "false"}  # YAML 1.1's, which OmegaConf's typed nodes read


def check_switches(jobs: list[DictConfig], compose: Callable[[list[str]], DictConfig]) -> None:
    """One rule for every switch: ``true`` or ``false``. OmegaConf reads ``yes``, ``on`` or ``1`` into a typed switch
    (``resume``) but leaves them a string in an untyped one (``net.prenorm``), which a class then takes as true."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for cfg in jobs:
        written = [str(o) for o in list(OmegaConf.to_container(cfg.hydra.overrides.task) or [])]  # as typed
        for given in written:
            override = parser.parse_override(given)
            key, value = override.key_or_group, override.value()
            if override.is_delete() or isinstance(value, bool):
                continue
            if isinstance(value, str) and value.lower() in SWITCH_WORDS:
                others = [o for o in written if o != given]
                switch = isinstance(OmegaConf.select(compose(others), key, default=None, **UNRESOLVED), bool)
            else:  # a value that resolves only in the job (${hydra:...}) is no switch word: checked later
                switch = isinstance(OmegaConf.select(cfg, key, default=None, **UNRESOLVED), bool)
            if switch:
                raise AttnexpError(
                    f"{given} is not allowed: {key} is a switch, true or false (every switch takes these two words "
                    f"only: yes, no, on, off, 1 and 0 are refused). Fix the override, e.g. {key}=true. {NOTHING}"
                )


def check_values(cfg: DictConfig) -> None:
    """The ranges of :data:`RANGES`, our constructors' rules (:data:`attnexp.rules.RULES`, before torch is imported)
    and a budget that ends."""
    for key, rule in {**RANGES, "threads": threads_rule()}.items():
        check_value(key, OmegaConf.select(cfg, key, default=None), rule)
    for group in CONSTRUCTED:
        node = OmegaConf.select(cfg, group, default=None)  # an interpolation is checked in the group it names
        for key, value in leaves(node if isinstance(node, DictConfig) else {}, group):
            if key.rpartition(".")[2] in RULES:
                check_value(key, value, RULES[key.rpartition(".")[2]])
    if cfg.trainer.max_epochs == -1 and cfg.trainer.max_steps == -1 and cfg.trainer.get("max_time") is None:
        raise AttnexpError(
            "trainer.max_epochs=-1 with trainer.max_steps=-1 trains without end: -1 means no limit on epochs when "
            "trainer.max_steps (or trainer.max_time) sets one. E.g. trainer.max_epochs=5, or trainer.max_steps=1000. "
            + NOTHING
        )


def threads_rule() -> Rule:
    """``threads``: at most the cores this process may use (more only wait on each other, and torch's thread pool of
    many thousands exhausts the memory)."""
    most = cores()
    return Rule(
        int,
        lambda v: 0 < v <= most,
        f"a positive integer up to the {most} cores this process may use, or null for the default",
        "1",
    )


def check_monitors(cfg: DictConfig, num_classes: int) -> None:
    """``task.monitor`` and each callback's ``monitor`` name a metric the run logs at validation (Lightning's
    checkpoint finds out only after the first one, with the run's folder written)."""
    from hydra.utils import instantiate

    from attnexp.training.module import monitored

    task = instantiate(cfg.task)
    known = monitored(task, num_classes)
    callbacks = cfg.get("callbacks") or {}
    for key in ["task.monitor", *(f"callbacks.{name}.monitor" for name in callbacks if callbacks[name])]:
        value = OmegaConf.select(cfg, key, default=None)
        if value is None or value in known:
            continue
        nearest = typos.near(str(value), known)
        raise AttnexpError(
            f"{key}={value} is not a metric the run logs at validation, so no checkpoint could be chosen by it: "
            f"{type(task).__name__} logs {', '.join(known)}. "
            f"{f'Did you mean {nearest[0]}? ' if nearest else ''}{NOTHING}"
        )


def check_trainer_switches(cfg: DictConfig) -> None:
    """Each argument of the Trainer class whose type is a switch (``detect_anomaly: bool``; ``deterministic``: a bool
    or ``"warn"``) gets one of its values: Lightning takes any other as it comes (a string as true) or fails on it
    only once training starts, with the run's folder written."""
    import typing

    from hydra.utils import get_object

    node = cfg.get("trainer") or {}
    try:
        hints = typing.get_type_hints(get_object(str(node.get("_target_"))).__init__)
    except Exception:  # a Trainer class that cannot be loaded or read: its construction says why
        return
    for key in node:
        words = switch_values(hints.get(str(key)))
        value = OmegaConf.select(cfg, f"trainer.{key}", default=None, **UNRESOLVED)
        if words is None or value is None or isinstance(value, bool) or value in words[2:]:
            continue
        given = next((o for o in cfg.hydra.overrides.task if typos.keyed(o) == f"trainer.{key}"), f"{key}={value}")
        raise AttnexpError(
            f"{given} is not allowed: trainer.{key} is a switch of the Trainer, {', '.join(words[:-1])} or "
            f"{words[-1]}. Fix the override, e.g. trainer.{key}=false. {NOTHING}"
        )


def switch_values(hint: Any) -> list[Any] | None:
    """The values a switch's type hint allows (true, false, then any literal words such as ``warn``); None for a
    hint that is no switch."""
    import types
    import typing

    args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    words: list[Any] = []
    for arg in args:
        if typing.get_origin(arg) is typing.Literal:
            words += [w for w in typing.get_args(arg) if isinstance(w, str)]
        elif arg not in (bool, type(None)):
            return None
    return ["true", "false", *words] if bool in args else None


def check_validation_interval(cfg: DictConfig, data: Any) -> None:
    """``trainer.val_check_interval`` given in batches is at most the training batches of an epoch (of ``data``, as
    trainer.limit_train_batches limits them), as Lightning requires once training starts: one that is more would
    fail after the run's folder is written."""
    trainer = cfg.trainer
    interval, limit = trainer.get("val_check_interval"), trainer.get("limit_train_batches")
    if not isinstance(interval, int) or isinstance(interval, bool) or trainer.get("check_val_every_n_epoch") is None:
        return
    if trainer.get("overfit_batches") or limit == 0 or data is None:
        return
    batches = len(data.train_dataloader())
    if isinstance(limit, int) and not isinstance(limit, bool):
        batches = min(batches, limit)
    elif isinstance(limit, float):
        batches = int(batches * limit)
    if interval > batches:
        given = next(
            (o for o in cfg.hydra.overrides.task if typos.keyed(o) == "trainer.val_check_interval"),
            f"trainer.val_check_interval={interval}",
        )
        raise AttnexpError(
            f"{given} is not allowed: an epoch has {batches} training batches here (data.batch_size="
            f"{OmegaConf.select(cfg, 'data.batch_size', default='?')}, trainer.limit_train_batches={limit}), and "
            f"validation every {interval} would never come within one. Give at most {batches}, a fraction of an epoch "
            f"(trainer.val_check_interval=0.5), or trainer.check_val_every_n_epoch=null to count batches across "
            f"epochs. {NOTHING}"
        )
