"""Command lines Hydra cannot compose, explained before anything runs: an option a config group does not have, a key
the config does not have (with the nearest ones: difflib over the composed keys and the group's options), a list of
values broken by a space. One paragraph, exit status 2, no run folder."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Iterator, Sequence
from typing import Any

from omegaconf import OmegaConf

from attnexp.errors import AttnexpError

# Hydra's flags that name another config or do not compose one: Hydra alone reads such a command line
CONFIG_FLAGS = {"-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir", "--experimental-rerun"}
NOT_COMPOSED = {*CONFIG_FLAGS, "-h", "--help", "--hydra-help", "--version", "--shell-completion", "-sc"}
# Hydra's flags that take a value (``--cfg job``); any other argument without '=' is no override
FLAGS_WITH_VALUE = {*CONFIG_FLAGS, "-c", "--cfg", "-p", "--package", "--shell-completion"}
TYPO = 0.9  # a key this near to one of the config's (difflib's ratio) is a typo of it, not a new argument
INFO_VALUES = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}


def overrides_and_words(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """The overrides (``key=value``) among command-line arguments, and the words that are neither an override, a
    flag nor a flag's value."""
    overrides, words, after = [], [], ""
    for arg in args:
        if arg.startswith("-"):
            after = arg
        elif "=" in arg or arg.startswith("~"):
            overrides.append(arg)
            after = ""
        elif after in FLAGS_WITH_VALUE or (after == "--info" and arg in INFO_VALUES):
            after = ""
        else:
            words.append(arg)
    return overrides, words


def check_words(args: Sequence[str]) -> None:
    """A list of values broken by a space (``model=dot, diff``: two arguments) or a stray word: what to write."""
    overrides, words = overrides_and_words(args)
    broken = [o for o in overrides if o.endswith(",")]
    if not broken and not words:
        return
    stray = f"{', '.join(repr(w) for w in words)} {'is' if len(words) == 1 else 'are'} not an override (key=value)"
    if broken and words:
        what, fix = (
            f"'{broken[0]} {' '.join(words)}' is one list split by a space",
            f"write {broken[0]}{','.join(words)}",
        )
    elif broken:
        what, fix = (
            f"'{broken[0]}' ends with a comma",
            f"write {broken[0].rstrip(',')}, or list every value: {broken[0]}VALUE",
        )
    else:
        what, fix = stray, "write each as key=value (a list of values: model=dot,euclid)"
    raise AttnexpError(
        f"The command line cannot be read: {what}. A list of values is one argument without spaces "
        f"(a shell splits 'model=dot, euclid' at the space): {fix}. Every other argument is key=value "
        "or a flag (attnexp --help). Nothing was run or written."
    )


def flat_keys(node: Any, where: str = "") -> Iterator[str]:
    """Every key of a config (as plain, unresolved containers), dotted: ``trainer.max_epochs``."""
    if isinstance(node, dict):
        for key, child in node.items():
            full = f"{where}.{key}" if where else str(key)
            yield full
            yield from flat_keys(child, full)


def node_at(plain: Any, key: str) -> Any:
    """The value at a dotted key of a plain config, or :data:`MISSING_KEY` (nothing is resolved: Hydra's run folder
    resolver makes folders)."""
    node: Any = plain
    for part in key.split(".") if key else []:
        if not isinstance(node, dict) or part not in node:
            return MISSING_KEY
        node = node[part]
    return node


def near(word: str, choices: Sequence[str]) -> list[str]:
    """The nearest of ``choices`` to ``word`` (difflib), if any is near."""
    return difflib.get_close_matches(word, list(dict.fromkeys(choices)), n=1, cutoff=0.6)


def sweep_values(override: Any) -> list[str]:
    """The values of a parsed override, each as it is written (one for a plain override; none Hydra expands later)."""
    if not override.is_sweep_override():
        return [override.get_value_element_as_str()]
    try:
        return list(override.sweep_string_iterator())
    except Exception:  # a range or glob the sweeper expands itself
        return []


def check_composition(args: Sequence[str], config_dir: str, config_name: str = "train") -> Any:
    """Compose the config of the command line (each swept value of a config group too) and explain, in one paragraph,
    what Hydra cannot compose; return the config of its first job (Hydra's node included), or None where Hydra alone
    reads the command line (``--help``) or explains what it cannot compose."""
    if any(a in NOT_COMPOSED for a in args):
        return None
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException, MissingConfigException

    overrides, _ = overrides_and_words(args)
    parsed = OverridesParser.create().parse_overrides(overrides)
    first = [sweep_values(o) for o in parsed]  # in the order of parsed (a key given twice keeps both)
    base = [f"{o.get_key_element()}={values[0]}" for o, values in zip(parsed, first) if values]
    with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
        try:
            cfg = compose(config_name, overrides=base, return_hydra_config=True)
        except MissingConfigException as err:
            raise AttnexpError(missing_option(err, overrides)) from None
        except HydraException as err:
            message = missing_key(err, parsed, first, config_name)
            if message:
                raise AttnexpError(message) from None
            return None
        check_sweep_mode(args, parsed, cfg)
        groups = set(cfg.hydra.runtime.choices)
        for override, values in zip(parsed, first):
            group = override.get_key_element().lstrip("+~")
            if group in groups and len(values) > 1:
                for value in values[1:]:
                    try:
                        compose(config_name, overrides=with_option(base, group, value), return_hydra_config=True)
                    except MissingConfigException as err:
                        raise AttnexpError(missing_option(err, overrides)) from None
                    except HydraException as err:
                        raise AttnexpError(lacking(err, parsed, groups, f"{group}={value}", config_name)) from None
    return cfg


def is_sweep(args: Sequence[str], cfg: Any) -> bool:
    """Whether the command line runs a sweep: ``--multirun`` (``-m``), or ``hydra.mode: MULTIRUN`` in the config, which
    ``--cfg`` and ``--info`` do not follow."""
    flags = {a.split("=", 1)[0] for a in args if a.startswith("-")}
    configured = str(OmegaConf.select(cfg, "hydra.mode")) == "RunMode.MULTIRUN"
    return bool(flags & {"-m", "--multirun"}) or (configured and not flags & {"-c", "--cfg", "-i", "--info"})


def check_sweep_mode(args: Sequence[str], parsed: Sequence[Any], cfg: Any) -> None:
    """Several values of a key (``model=dot,euclid``) make a sweep: without ``--multirun`` (or ``hydra.mode:
    MULTIRUN``), say so."""
    swept = [o.input_line for o in parsed if o.is_sweep_override()]
    if not swept or is_sweep(args, cfg):
        return
    raise AttnexpError(
        f"{swept[0]} gives several values, which makes a sweep (a run of each): add --multirun (-m) to "
        "run them, or give one value (a list as one value is written key=[a,b]). Nothing was run or written."
    )


def missing_option(err: Any, overrides: Sequence[str]) -> str:
    """``model=softermax``: the group's options, the nearest first."""
    missing = str(getattr(err, "missing_cfg_file", "") or "")
    group, _, option = missing.rpartition("/")
    options = list(getattr(err, "options", None) or [])
    given = next((o for o in overrides if o.lstrip("+~").startswith(f"{group}=")), f"{group}={option}")
    if not group or not options:
        return f"The config cannot be composed: {' '.join(str(err).split())}. Nothing was run or written."
    close = near(option, options)
    guess = f" Did you mean {group}={close[0]}?" if close else ""
    own = (
        f" An option of your own is configs/{group}/{option}.yaml in the folder you run attnexp from."
        if not group.startswith("hydra")
        else ""
    )
    return (
        f"{given} names no option of the config group {group}: its options are {', '.join(options)}.{guess}{own} "
        "Nothing was run or written."
    )


def missing_key(err: Exception, parsed: Sequence[Any], values: Sequence[list[str]], config_name: str) -> str | None:
    """A key the config does not have: the nearest keys of the composed config (and group names); ``+key=...`` only
    where the key is an argument of the class its node builds (a Trainer argument the config does not list). None
    where the key is one of another option a sweep takes."""
    text = " ".join(str(err).split())
    try:
        groups = set(composed(config_name, [])["hydra"]["runtime"]["choices"])
        chosen = [(o, v) for o, v in zip(parsed, values) if o.get_key_element() in groups and v]
        plain = composed(config_name, [f"{o.get_key_element()}={v[0]}" for o, v in chosen])
    except Exception:
        return f"The config cannot be composed: {text}. Nothing was run or written."
    keys = list(flat_keys(plain))
    for override in parsed:
        raw = override.get_key_element()
        key, value = raw.lstrip("+~"), override.input_line.split("=", 1)[-1]
        exists = node_at(plain, key) is not MISSING_KEY
        if raw.startswith("+") and not raw.startswith("++") and exists and "already" in text:
            return (
                f"{override.input_line} adds the key {key}, which the config already has: set it without '+' "
                f"({key}={value}). Nothing was run or written."
            )
        if exists or raw.startswith("+") or key in groups:
            continue
        elsewhere = other_options_with(key, chosen, config_name)
        if elsewhere:
            return (
                f"{override.input_line} sets {key}, a key of {' and '.join(elsewhere)} only: every job of the sweep "
                "gets it, and the others cannot take it. Sweep the options that take it on their own. Nothing was "
                "run or written."
            )
        parent, _, leaf = key.rpartition(".")
        same_leaf = [k for k in keys if k.rpartition(".")[2] == leaf]  # a key of that name elsewhere: model.heads
        close = near(key, same_leaf) or near(key, [*keys, *groups])
        typo = bool(close) and difflib.SequenceMatcher(None, key, close[0]).ratio() >= TYPO
        takes = None if typo else argument_of(node_at(plain, parent), leaf)  # imports the class: only where needed
        if takes:
            return (
                f"{override.input_line} sets {key}, which the config does not list; {takes} takes {leaf}: add it "
                f"with +{key}={value}. Nothing was run or written."
            )
        hint = (
            f"Did you mean {close[0]}?"
            if close
            else f"The keys of {parent or 'the top level'} are: {', '.join(child_keys(plain, parent))}."
        )
        verb = "deletes" if raw.startswith("~") else "sets"
        return (
            f"{override.input_line} {verb} {key}, which is not a key of the composed config. {hint} Every key: "
            "attnexp --cfg job (with your options). Nothing was run or written."
        )
    return f"The config cannot be composed: {text}. Nothing was run or written."


def lacking(err: Exception, parsed: Sequence[Any], groups: set[str], option: str, config_name: str) -> str:
    """A sweep whose key override one of its swept options (``option``: ``model=dot``) does not have."""
    group = option.split("=", 1)[0]
    chosen = [o.input_line for o in parsed if o.get_key_element() in groups and o.get_key_element() != group]
    try:
        plain = composed(config_name, [*chosen, option])
    except Exception:
        plain = {}
    key = next(
        (
            o.get_key_element()
            for o in parsed
            if o.get_key_element() not in groups
            and not o.get_key_element().startswith("+")
            and node_at(plain, o.get_key_element().lstrip("~")) is MISSING_KEY
        ),
        None,
    )
    if key is None:
        return (
            f"The config of the sweep's jobs with {option} cannot be composed: {' '.join(str(err).split())}. "
            "Nothing was run or written."
        )
    return (
        f"{key} is not a key of {option}: every job of the sweep gets it, and the jobs of {option} cannot take it. "
        "Sweep the options that take it on their own. Nothing was run or written."
    )


def other_options_with(key: str, chosen: Sequence[tuple[Any, list[str]]], config_name: str) -> list[str]:
    """The other values of swept config groups (``model=euclid`` of ``model=dot,euclid``) whose config has ``key``."""
    found = []
    base = [f"{o.get_key_element()}={v[0]}" for o, v in chosen]
    for override, values in chosen:
        group = override.get_key_element()
        for value in values[1:]:
            try:
                plain = composed(config_name, with_option(base, group, value))
            except Exception:
                continue
            if node_at(plain, key) is not MISSING_KEY:
                found.append(f"{group}={value}")
    return found


def with_option(base: Sequence[str], group: str, value: str) -> list[str]:
    """The overrides ``base`` with the config group ``group`` set to ``value`` (another option a sweep takes)."""
    return [*(b for b in base if not b.lstrip("+~").startswith(f"{group}=")), f"{group}={value}"]


def composed(config_name: str, overrides: Sequence[str]) -> Any:
    """The config Hydra composes with ``overrides`` (its own node included) as plain containers, unresolved; in the
    Hydra context :func:`check_composition` opens."""
    from hydra import compose

    cfg = compose(config_name, overrides=list(overrides), return_hydra_config=True)
    return OmegaConf.to_container(cfg, resolve=False)


MISSING_KEY = object()


def child_keys(plain: Any, parent: str) -> list[str]:
    node = node_at(plain, parent)
    return [str(k) for k in node if str(k) != "hydra"] if isinstance(node, dict) else []


def argument_of(node: Any, leaf: str) -> str | None:
    """The class a node builds (its ``_target_``) when that class takes an argument ``leaf``."""
    target = node.get("_target_") if isinstance(node, dict) else None
    if not isinstance(target, str) or "${" in target:
        return None
    try:
        from hydra.utils import get_object

        params = inspect.signature(get_object(target)).parameters
    except Exception:
        return None
    return target if leaf in params else None
