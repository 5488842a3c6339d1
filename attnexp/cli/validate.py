"""Checks on the composed config, so a wrong value fails before training with a clear message.

:func:`check_config` runs before torch is imported: the argument rules that the net, data and module
constructors apply to themselves (:mod:`attnexp.rules`), on the config's values, plus the rules of keys
no constructor here owns and the checks that span config groups. The ``model`` group is left to the mixer:
its options are its own (a mixer of another package may give ``eps`` or ``reduction`` another meaning), and
it checks them when it is built. :func:`check_environment` needs torch.
"""

from __future__ import annotations

import inspect
from typing import Any

from omegaconf import DictConfig, OmegaConf

from attnexp.errors import AttnexpError
from attnexp.rules import RULES, Rule, check_value

CONSTRUCTED = ("net", "data", "module")  # groups whose objects check their own arguments: the same rules run here first
# keys of the top level, of Lightning's Trainer and of torch's optimizer: no constructor of ours checks them
CONFIG_RULES = {
    "seed": Rule(int, lambda v: v >= 0, "a non-negative integer", "0"),
    "threads": Rule(int, lambda v: v > 0, "a positive integer, or null for torch's default", "1"),
    "trainer.max_epochs": Rule(
        int, lambda v: v > 0 or v == -1, "a positive integer (-1: no limit, use trainer.max_steps)", "5"
    ),
    "trainer.max_steps": Rule(int, lambda v: v > 0 or v == -1, "a positive integer, or -1 for no limit", "1000"),
    "module.optimizer.lr": Rule(float, lambda v: v > 0, "a positive number such as 3e-3", "3e-3"),
    "trainer.accumulate_grad_batches": Rule(
        int, lambda v: v > 0, "a positive integer (batches whose gradients add up to one optimizer step)", "4"
    ),
    "trainer.gradient_clip_val": Rule(float, lambda v: v > 0, "a positive number, or null for no clipping", "1.0"),
    "trainer.gradient_clip_algorithm": Rule(
        str,
        lambda v: v in ("norm", "value"),
        "'norm' (the gradients' total norm) or 'value' (each element), or null for norm",
        "norm",
    ),
}


def check_config(cfg: DictConfig) -> None:
    """Raise :class:`AttnexpError` for the first value of the wrong type or out of range, or a schedule
    that cannot run. Reads the config only (imports nothing heavy)."""
    for key, rule in CONFIG_RULES.items():
        check_value(key, OmegaConf.select(cfg, key, default=None), rule)
    for group in CONSTRUCTED:
        node = OmegaConf.select(cfg, group, default=None)
        if isinstance(node, DictConfig):
            _check_arguments(group, node)
    check_schedule_length(cfg)


def _check_arguments(prefix: str, node: DictConfig) -> None:
    for key in node:  # a key may be an int (``+data.w={0:1.0}``): looked up as it is, named as a string
        name = str(key)
        if OmegaConf.is_interpolation(node, key):  # type: ignore[arg-type]  # another group's node: checked there
            continue
        value = node[key]
        if isinstance(value, DictConfig):
            _check_arguments(f"{prefix}.{name}", value)
        elif name in RULES:
            check_value(f"{prefix}.{name}", value, RULES[name])


def quote_path(argument: str, keys: tuple[str, ...]) -> str:
    """``KEY=PATH`` for a key in ``keys`` (or under ``paths.``) with PATH quoted for Hydra's override grammar, which
    reads the ``=`` and ``,`` of run folder names (``..._seed=1``, ``.../model=euclid/seed=1``) as syntax; other
    arguments, and quoted values, as they are."""
    key, sep, value = argument.partition("=")
    if not ((key in keys or key.startswith("paths.")) and sep) or (len(value) > 1 and value[0] == value[-1] in "'\""):
        return argument
    if "'" not in value:
        return f"{key}='{value}'"
    if '"' not in value:  # a folder named by an override that was itself quoted
        return f'{key}="{value}"'
    return f"{key}='" + value.replace("'", "\\'") + "'"


def check_override_syntax(args: list[str]) -> None:
    """Refuse, in one paragraph, a command-line override Hydra's grammar cannot read. Run folders are named by their
    overrides (``..._seed=1``), so a path to one, given as ``ckpt_path=`` or ``paths.*=``, needs quotes."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for arg in args:
        if arg.startswith("-") or "=" not in arg:
            continue
        try:
            parser.parse_overrides([arg])
        except OverrideParseException as err:
            key, value = arg.split("=", 1)
            raise AttnexpError(
                f"The override {arg!r} cannot be read ({str(err).splitlines()[0].strip()}). A value holding '=', ',', "
                "spaces or brackets, such as the path of a run folder "
                "(named by its overrides, e.g. ..._seed=1), goes in "
                f"quotes inside the argument: {key}='{value}' (in a shell: \"{key}='{value}'\")."
            ) from None


def check_environment(cfg: DictConfig) -> None:
    """The checks that import the classes a config names, or ask torch about the machine."""
    import torch

    check_optimizer_arguments(cfg)
    accelerator = str(OmegaConf.select(cfg, "trainer.accelerator", default="auto"))
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise AttnexpError(
            f"trainer.accelerator={accelerator} asks for a GPU, but PyTorch sees none on this machine "
            f"(torch.cuda.is_available() is False; torch {torch.__version__}). Use trainer=cpu, or "
            "trainer=default to pick whatever accelerator is present."
        )


def unaccepted(target: str, keys: Any) -> list[str]:
    """The ``keys`` that the callable ``target`` (a dotted path) takes no argument for."""
    from hydra.utils import get_object

    params = inspect.signature(get_object(target)).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    return sorted(str(k) for k in keys if k not in params)


def check_optimizer_arguments(cfg: DictConfig) -> None:
    """Every key of ``module.optimizer`` must be an argument of its class: switching ``_target_``
    keeps the default's keys (``fused``, say), which not every optimizer takes."""
    from hydra.utils import get_object

    node = OmegaConf.select(cfg, "module.optimizer", default=None)
    if not isinstance(node, DictConfig) or "_target_" not in node:
        return
    try:
        unknown = unaccepted(node._target_, [k for k in node if not str(k).startswith("_")])
    except Exception:  # an unknown class: instantiating it reports that
        return
    if unknown:
        takes = [k for k in inspect.signature(get_object(node._target_)).parameters if k != "params"]
        raise AttnexpError(
            f"module.optimizer sets {', '.join(unknown)}, which {node._target_} does not take "
            f"(it takes {', '.join(takes)}). Remove the key with "
            f"{' '.join(f'~module.optimizer.{k}' for k in unknown)}, or "
            "set module.optimizer._target_ to an optimizer that takes it."
        )


def check_schedule_length(cfg: DictConfig) -> None:
    """A cosine schedule's length ``T_max`` (trainer.max_epochs by default) must be a positive number of epochs."""
    node = OmegaConf.select(cfg, "module.scheduler", default=None)
    if not isinstance(node, DictConfig) or "T_max" not in node:
        return
    t_max = node.T_max
    if isinstance(t_max, bool) or not isinstance(t_max, int) or t_max <= 0:
        raise AttnexpError(
            f"module.scheduler.T_max={t_max} is not allowed: the cosine schedule anneals the learning rate over "
            "T_max epochs (trainer.max_epochs unless set), so it must be a positive integer. When training by "
            "trainer.max_steps with trainer.max_epochs=-1, set module.scheduler.T_max to the number of epochs "
            "those steps make, or drop the schedule with module/scheduler=null."
        )
