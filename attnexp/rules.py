"""Rules for single argument values, each written once.

A constructor applies them to its own arguments (``check("net", depth=depth)``), and the command line
applies the same rules to the composed config of the groups whose classes are ours (``net``, ``data``, ``module``)
before it imports torch, so a bad value is explained at once. A mixer's options are the mixer's: it checks them
itself when built (the attention mixers apply the ``heads`` and ``dropout`` rules here; euclid its ``eps``),
and no rule here is applied to a ``model`` key by its name alone. Imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from attnexp.errors import AttnexpError


class Rule(NamedTuple):
    kind: type  # int, float (an int passes as a float), str or bool; a bool passes as nothing else
    ok: Callable[[Any], bool]
    allowed: str  # what the value must be, for the message
    example: str


def _positive_int(allowed: str = "a positive integer") -> Rule:
    return Rule(int, lambda v: v > 0, allowed, "1")


# the run's seed and a data split's: what every generator they seed takes (numpy's at most 2**32 - 1)
SEED = Rule(int, lambda v: 0 <= v < 2**32, "an integer from 0 to 4294967295 (2**32 - 1)", "0")


def _probability(allowed: str = "a probability in [0, 1)") -> Rule:
    return Rule(float, lambda v: 0 <= v < 1, allowed, "0.1")


# argument name -> rule, whichever constructor (model, net, data) takes an argument of that name
RULES: dict[str, Rule] = {
    "heads": _positive_int("a positive integer that divides the token width"),
    "dropout": _probability(),
    "embed_dropout": _probability("a probability in [0, 1), or null for net.dropout"),
    "depth": _positive_int(),
    "enc_depth": _positive_int("a positive integer (encoder blocks)"),
    "dec_depth": _positive_int("a positive integer (decoder blocks)"),
    "beam": _positive_int("a positive integer (1: greedy decoding; more: beam search with that many hypotheses)"),
    "max_digits": _positive_int("a positive integer (digits per image at most)"),
    "dim": _positive_int("a positive integer, or null for the patch width"),
    "mlp_ratio": Rule(
        float, lambda v: v >= 0, "a number >= 0 (feed-forward width / dim; 0: no feed-forward layer)", "2.0"
    ),
    "batch_size": _positive_int(),
    "eval_batch_size": _positive_int(),
    "val_size": _positive_int("a positive integer (validation picks the best checkpoint)"),
    "test_size": _positive_int(),
    "train_size": _positive_int(),
    "vocab": _positive_int("a positive integer (tokens in the vocabulary)"),
    "seq_len": _positive_int("a positive integer (tokens per sequence)"),
    "num_pairs": _positive_int("a positive integer (key-value pairs per sequence)"),
    "num_queries": _positive_int("a positive integer, or null for one query per pair"),
    "power_a": Rule(
        float,
        lambda v: 0 < v <= 1,
        "a number in (0, 1] (query gaps drawn with probability ~ gap^(power_a - 1); 1: uniform)",
        "0.01",
    ),
    "distinct_values": Rule(bool, lambda v: True, "true or false (the values of a sequence all differ)", "true"),
    "answers_shown": Rule(
        bool, lambda v: True, "true or false (each queried key is followed by its value in the input)", "false"
    ),
    "num_tokens": _positive_int("a positive integer (data tokens to copy)"),
    "num_attention": _positive_int("a positive integer (inputs whose attention maps are drawn)"),
    "num_predictions": _positive_int("a positive integer (inputs shown with their predictions)"),
    "num_examples": _positive_int("a positive integer (examples shown with their outputs)"),
    "max_tokens": _positive_int("a positive integer (tokens shown in a text attention map)"),
    "top_k": _positive_int("a positive integer (next tokens shown)"),
    "max_depth": _positive_int("a positive integer (nested operators)"),
    "max_args": _positive_int("an integer >= 2 (arguments per operator)"),
    "max_length": _positive_int("a positive integer (tokens per expression)"),
    "train_max_len": _positive_int("a positive integer (the longest training sequence)"),
    "patch_size": _positive_int("a positive integer that divides the image size"),
    "context": _positive_int("a positive integer (tokens per window)"),
    "stride": _positive_int("a positive integer (tokens between training windows), or null for the context"),
    "windows": _positive_int(
        "a positive integer (training windows per epoch at random starts), or null for strided windows"
    ),
    "split_seed": SEED,
    "crop_padding": Rule(
        int, lambda v: v >= 0, "a number of pixels >= 0 (0 = no crop; data.augment=null switches augmenting off)", "4"
    ),
    "divergence_check_every": _positive_int("a positive integer (training steps between checks for a NaN loss)"),
    "scheduler_interval": Rule(
        str, lambda v: v in ("epoch", "step"), "'epoch' or 'step' (when the learning-rate schedule steps)", "epoch"
    ),
    "weight_decay_on": Rule(
        str,
        lambda v: v in ("all", "matrices"),
        "'all' or 'matrices' (weights of 2 or more dimensions only)",
        "matrices",
    ),
}


def _typed(value: Any, kind: type) -> bool:
    if kind is str or kind is bool:
        return isinstance(value, kind)
    if isinstance(value, bool):
        return False
    return isinstance(value, int) if kind is int else isinstance(value, (int, float))


def check_value(key: str, value: Any, rule: Rule) -> None:
    """Raise :class:`AttnexpError` naming ``key`` if ``value`` breaks ``rule``; None (not set) passes."""
    if value is None or (_typed(value, rule.kind) and rule.ok(value)):
        return
    got = f"'{value}'" if isinstance(value, str) else value
    raise AttnexpError(
        f"{key}={got} is not allowed: {key} must be {rule.allowed}. "
        f"Fix the override, e.g. {key}={rule.example}, or check the config group file that sets it."
    )


def check(group: str, **arguments: Any) -> None:
    """Apply the rule of every argument that has one; ``group`` is its place in the config (``model``,
    ``data.augment``)."""
    for name, value in arguments.items():
        if name in RULES:
            check_value(f"{group}.{name}", value, RULES[name])
