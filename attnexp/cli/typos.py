"""What Hydra cannot read or compose, explained in one paragraph: a stray word or a list broken by a space, an override
its grammar cannot parse, an option a config group does not have and a key the config does not have (each with the
nearest ones, by difflib), a value of the wrong type (:mod:`attnexp.cli.schema`)."""

from __future__ import annotations

import difflib
import errno
import inspect
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ValidationError

from attnexp.errors import AttnexpError
from attnexp.runs.settings import leaves

# Hydra's flags that name another config or do not compose one: Hydra alone reads such a command line
CONFIG_FLAGS = {"-cn", "--config-name", "-cp", "--config-path", "-cd", "--config-dir", "--experimental-rerun"}
NOT_COMPOSED = {*CONFIG_FLAGS, "-h", "--help", "--hydra-help", "--version", "--shell-completion", "-sc"}
FLAGS_WITH_VALUE = {*CONFIG_FLAGS, "-c", "--cfg", "-p", "--package", "--shell-completion"}  # ``--cfg job``
INFO_VALUES = {"all", "config", "defaults", "defaults-tree", "plugins", "searchpath"}
LISTED = 12  # options named in a message, the nearest first
TYPO = 0.9  # a key this near to one of the config's (difflib's ratio) is a typo of it, not a new argument
NOTHING = "Nothing was run or written."


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
    elif words:
        listed = ", ".join(repr(w) for w in words)
        what, fix = f"{listed} {'is' if len(words) == 1 else 'are'} not an override (key=value)", "write key=value"
    else:
        return
    raise AttnexpError(
        f"The command line cannot be read: {what}. A list of values is one argument without spaces (a shell splits "
        f"'model=dot, euclid' at the space): {fix}. Every other argument is key=value or a flag (attnexp --help). "
        + NOTHING
    )


def check_syntax(args: Sequence[str]) -> list[Any]:
    """The overrides parsed by Hydra's grammar; one it cannot read is explained (a folder's path needs quotes)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser, parsed = OverridesParser.create(), []
    for arg in overrides_and_words(args)[0]:
        try:
            parsed += parser.parse_overrides([arg])
        except ValueError as err:  # a number of more digits than Python converts (sys.get_int_max_str_digits)
            raise AttnexpError(
                f"The override {arg!r} cannot be read: {err}. Give the number in fewer digits. " + NOTHING
            ) from None
        except OverrideParseException as err:
            key, _, value = arg.partition("=")
            raise AttnexpError(
                f"The override {arg!r} cannot be read ({str(err).splitlines()[0].strip()}). A value holding '=', ',', "
                "spaces or brackets, such as the path of a run folder, goes in quotes inside the argument: "
                f"{key}='{value}' (in a shell: \"{key}='{value}'\"). " + NOTHING
            ) from None
    keyless = [o.input_line for o in parsed if not o.key_or_group]
    if keyless:
        raise AttnexpError(
            f"{keyless[0]!r} sets no key: an override is key=value (seed=3), group=option (model=euclid) or a flag "
            f"(--multirun). attnexp --help lists the groups, attnexp --cfg job the keys. {NOTHING}"
        )
    return parsed


def quote_path(argument: str, keys: tuple[str, ...]) -> str:
    """``KEY=PATH`` for a key in ``keys`` (or under ``paths.``) with PATH quoted for Hydra's grammar, which reads the
    ``=`` and ``,`` of folder names (``seed=1``) as syntax; other arguments, and quoted values, as they are."""
    key, sep, value = argument.partition("=")
    if not ((key in keys or key.startswith("paths.")) and sep) or (len(value) > 1 and value[0] == value[-1] in "'\""):
        return argument
    if "'" not in value:
        return f"{key}='{value}'"
    return f'{key}="{value}"' if '"' not in value else f"{key}='" + value.replace("'", "\\'") + "'"


def near(word: str, choices: Sequence[str]) -> list[str]:
    return difflib.get_close_matches(word, list(dict.fromkeys(choices)), n=1, cutoff=0.6)


def flat_keys(node: Any) -> list[str]:
    """Every key of a config, dotted, each node's before its own: ``trainer``, ``trainer.max_epochs``."""
    return list(dict.fromkeys(key[:end] for key, _ in leaves(node) for end in dots(key)))


def dots(key: str) -> list[int]:
    """Where ``key``'s prefixes end: ``a.b.c`` -> 1, 3, 5."""
    return [i for i, c in enumerate(key) if c == "."] + [len(key)]


def keyed(override: str) -> str:
    """An override's key: ``trainer.max_epochs`` of ``trainer.max_epochs=3`` or ``~trainer.max_epochs``."""
    return override.lstrip("+~").split("=", 1)[0]


def explain(err: Exception, job: Sequence[str], config_name: str) -> str:
    """One paragraph for a command line (``job``: its overrides) that Hydra cannot compose."""
    from hydra import compose
    from hydra.errors import MissingConfigException

    if isinstance(err, MissingConfigException):
        return missing_option(err, job)
    if isinstance(err, OSError) and err.errno == errno.ENAMETOOLONG:
        return too_long(err, job)
    cause, text = err.__cause__, " ".join(str(err).split())
    named = str(getattr(cause, "full_key", "") or "") or next(iter(re.findall(r"'([\w.]+)'", text)), "")
    found = [o for o in job if keyed(o) == named or keyed(o).startswith(f"{named}.")]
    given = next((o for o in reversed(found) if o.lstrip("+~") in text), found[-1] if found else f"{named}=...")
    key = keyed(given)
    repeats = [o for o in job if keyed(o) == key]
    times = "twice" if len(repeats) == 2 else f"{len(repeats)} times"
    twice = f" {key} is given {times} ({', '.join(repeats)}): give it once." if len(repeats) > 1 else ""
    if isinstance(cause, ValidationError):
        message = str(cause).splitlines()[0]
        return f"{given} is not allowed: {message}.{twice} See attnexp --cfg job for the key's present value. {NOTHING}"
    if "already" in text and given.startswith("+"):
        if twice:
            return f"{given} adds {key} a second time.{twice} {NOTHING}"
        return f"{given} adds the key {key}, which the config already has: set it without '+' ({given[1:]}). {NOTHING}"
    try:  # the config without the keys the command line sets: its keys are what it could have meant
        kept = [o for o in job if "." not in keyed(o) and "=" in o and keyed(o) != key]
        plain = compose(config_name, overrides=kept)
    except Exception:
        plain = None
    if not key or plain is None:
        return f"The config cannot be composed: {text}. {NOTHING}"
    keys, (parent, _, leaf) = flat_keys(OmegaConf.to_container(plain, resolve=False)), key.rpartition(".")
    keys = [k for k in keys if not k.rpartition(".")[2].startswith("_")]  # _target_, _partial_: no one's typo
    node = OmegaConf.select(plain, parent) if parent else plain
    if options_of(node) is not None:
        return not_an_option(given, parent, node, elsewhere=[k for k in keys if k.rpartition(".")[2] == leaf])
    value = given.split("=", 1)[-1]
    groups = [g for g in keys if "." not in g and value in group_options(g)]  # modle=dot: a group with that option
    close = near(key, groups) or near(key, [k for k in keys if k.rpartition(".")[2] == leaf]) or near(key, keys)
    group = close and close[0] in groups
    listed = ", ".join(str(k) for k in node) if isinstance(node, DictConfig) else ""
    hint = f"Did you mean {close[0]}{f'={value}' if group else ''}?" if close else ""
    hint = hint or f"The keys of {parent or 'the top level'} are: {listed}."
    verb = "deletes" if given.startswith("~") else "sets"
    return f"{given} {verb} {key}, which is not a key of the composed config. {hint} Every key: --cfg job. {NOTHING}"


def too_long(err: OSError, job: Sequence[str]) -> str:
    """A key or option longer than a file name may be: Hydra asks the file system whether a key names a config group
    (a folder) and an option a file (``<option>.yaml``)."""
    name = Path(str(err.filename)).name
    option = next((o for o in job if f"{o.partition('=')[2]}.yaml" == name), None)
    if option is not None:
        group = keyed(option)
        return (
            f"{option} names an option of {len(name) - 5} characters, longer than a file name may be here (an option "
            f"of the group {group} is a file, {group}/<option>.yaml): its options are "
            f"{', '.join(group_options(group)) or 'none'}. {NOTHING}"
        )
    given = next((o for o in job if keyed(o) == name), name)
    return (
        f"{given} names a key of {len(keyed(given))} characters, longer than a file name may be here: Hydra looks "
        "for a config group of that name (a folder) before it sets a key, and no key of the config is that long. "
        f"Give a key of the config (--cfg job lists every key), e.g. trainer.max_epochs=3. {NOTHING}"
    )


def misspelt_option(cfg: DictConfig, err: TypeError) -> str | None:
    """The paragraph for a class given a keyword it does not take: the node that sets it, and its class's options."""
    leaf = next(iter(re.findall(r"unexpected keyword argument '(\w+)'", str(err))), None)
    for given in cfg.hydra.overrides.task:
        parent, _, key = keyed(given).rpartition(".")
        node = OmegaConf.select(cfg, parent, default=None) if parent else None
        if key == leaf and isinstance(node, DictConfig) and options_of(node) is not None:
            return not_an_option(given, parent, node)
    return None


def not_an_option(given: str, parent: str, node: DictConfig, elsewhere: Sequence[str] = ()) -> str:
    """``model.kernal_q=3`` under a node that builds a class: the options that class takes, the nearest first (or a key
    of that name ``elsewhere`` in the config: ``module.gradient_clip_val``); an argument it takes but the config does
    not list is added with ``+``."""
    key = keyed(given)
    leaf = key.rpartition(".")[2]
    found = options_of(node)
    assert found is not None
    name, where, options = found
    configured = [str(k) for k in node if not str(k).startswith("_") and not (given.startswith("+") and k == leaf)]
    options = list(dict.fromkeys([*configured, *options]))
    if leaf in options:
        fix = f"add it with +{key}={given.split('=', 1)[-1]}"
        return f"{given} sets {key}, an option of {name} ({where}) that the config does not list: {fix}. {NOTHING}"
    close = near(leaf, options)
    hint = f" Did you mean {parent}.{close[0]}?" if close else ""
    hint = hint or "".join(f" Did you mean {k}?" for k in elsewhere[:1])
    first = options if len(options) <= LISTED else [*close, *(o for o in options if o not in close)][:LISTED]
    more = "" if len(options) <= LISTED else f" and {len(options) - LISTED} more (--cfg job shows the config)"
    listed = ", ".join(first) + more
    return f"{key} is not an option of {name} ({where}); its options are {listed}.{hint} {NOTHING}"


def group_options(group: str) -> list[str]:
    """The options of a config group on the present search path (none for a key that is no group)."""
    from hydra.core.global_hydra import GlobalHydra

    try:
        return list(GlobalHydra.instance().config_loader().get_group_options(group))
    except Exception:
        return []


def missing_option(err: Any, job: Sequence[str]) -> str:
    """``model=softermax``: the group's options, the nearest first."""
    group, _, option = str(getattr(err, "missing_cfg_file", "") or "").rpartition("/")
    options = list(getattr(err, "options", None) or [])
    if not group or not options:
        return f"The config cannot be composed: {' '.join(str(err).split())}. {NOTHING}"
    given = next((o for o in job if o.lstrip("+~").startswith(f"{group}=")), f"{group}={option}")
    guess = "".join(f" Did you mean {group}={close}?" for close in near(option, options))
    own = "" if group.startswith("hydra") else f" An option of your own is configs/{group}/{option}.yaml here."
    listed = ", ".join(options)
    return f"{given} names no option of the config group {group}: its options are {listed}.{guess}{own} {NOTHING}"


def options_of(node: Any) -> tuple[str, str, list[str]] | None:
    """The class a config node builds (its ``_target_``), where it is defined, and the keyword options it takes: the
    named parameters with defaults of its ``__init__`` and of each base it passes ``**options`` on to, less what a
    network hands every mixer (:class:`~attnexp.mixers.request.MixerRequest`); None for a node that builds none."""
    target = node.get("_target_") if isinstance(node, DictConfig) else None
    if not isinstance(target, str) or "${" in target:
        return None
    try:
        from hydra.utils import get_object

        from attnexp.mixers.frames import INSTALLED, shown, under

        built = get_object(target)
        chain = (
            [c.__dict__["__init__"] for c in built.__mro__ if "__init__" in c.__dict__]
            if isinstance(built, type)
            else [built]
        )
        file, line = inspect.getsourcefile(built), inspect.getsourcelines(built)[1]
    except Exception:
        return None
    options: list[str] = []
    for function in chain:
        params = inspect.signature(function).parameters.values()
        options += [
            p.name for p in params if p.default is not p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        if not any(p.kind is p.VAR_KEYWORD for p in params) or function is object.__init__:
            break
    handed = {"num_tokens", "out_proj", "shared_over_channels"}  # the network's requests besides dim, causal, heads
    source = Path(file) if file else None  # the user's own file, not a library's in a virtual environment here
    mine = source is not None and source.is_relative_to(Path.cwd()) and not under(source, INSTALLED)
    where = f"{shown(source)}:{line}" if source is not None and mine else target
    return getattr(built, "__name__", target), where, [o for o in dict.fromkeys(options) if o not in handed]
