"""Checks of what a call returns and where: its shapes, its token layout, and that samples stay apart."""

from __future__ import annotations

import functools
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers.conformance.kit import Kit, Outcome, refusal, relative, short, training_mode
from attnexp.mixers.tracing import computed_at, first_differing


def shapes(kit: Kit) -> Outcome:
    """Self-attention gives (B, Lq, C) at the checked length and at one more token (so that an output in another
    layout shows even where the width equals the length), weights (B, H, Lq, Lq); cross-attention from Lk keys
    gives (B, Lq, C) and weights (B, H, Lq, Lk). A wrong shape is named beside the expected one."""
    s, wrong = kit.size, []
    mixer = kit.build()
    wrong += call_shapes(mixer, "self", kit.x, None, s.queries)
    measured = f"self-attention {tuple(kit.x.shape)}"
    try:
        longer = kit.noise(s.batch, s.queries + 1, s.dim)
        wrong += call_shapes(
            kit.build(num_tokens=s.queries + 1), f"self, {s.queries + 1} tokens", longer, None, s.queries + 1
        )
        measured += f" and at {s.queries + 1} tokens"
    except AttnexpError as err:
        refusal(err)
        measured += f"; {s.queries + 1} tokens refused: {short(err)}"
    try:
        cross = kit.build(num_tokens=s.keys, causal=False)
        wrong += call_shapes(cross, "cross", kit.x, kit.context, s.keys)
        measured += f", cross-attention from {s.keys} keys"
    except AttnexpError as err:
        refusal(err)
        measured += f"; cross-attention refused: {short(err)}"
    if wrong:
        return False, f"{type(mixer).__name__} returned " + "; ".join(wrong)
    return True, measured + ": outputs (B, Lq, C)"


def call_shapes(mixer: nn.Module, label: str, x: Tensor, context: Tensor | None, keys: int) -> list[str]:
    """What is wrong with the shapes of one call, with and without weights: expected beside actual."""
    wrong = []
    for need_weights in (False, True):
        out, weights = mixer(x, context=context, need_weights=need_weights)
        again = functools.partial(mixer, x, context=context, need_weights=need_weights)  # for the line computing it
        if out.shape != x.shape:
            computed = computed_at(mixer, functools.partial(returned, again, 0))
            wrong.append(f"{label}: output {tuple(out.shape)}{computed}, expected (B, Lq, C) = {tuple(x.shape)}")
        heads = getattr(mixer, "heads", None)
        expected = (x.shape[0], heads or "H", x.shape[1], keys)
        if (
            weights is not None
            and weights.dim() == 4
            and (
                weights.shape[0] != x.shape[0]
                or weights.shape[-2:] != (x.shape[1], keys)
                or (heads and weights.shape[1] != heads)
            )
        ):
            wrong.append(
                f"{label}: weights {tuple(weights.shape)}{computed_at(mixer, functools.partial(returned, again, 1))}, "
                f"expected (B, H, Lq, Lk) = ({', '.join(map(str, expected))})"
            )
    return sorted(set(wrong), key=wrong.index)


def token_layout(kit: Kit) -> Outcome:
    """For a mixer that declares ``permutation_equivariant`` (no positions inside it): permuting the tokens of a
    non-causal self-attention permutes its output the same way, so an output returned in another layout (tokens and
    width swapped where they are equal in number) shows. A mixer that refuses to be built non-causal (causal only)
    does not take part."""
    try:
        mixer = kit.build(causal=False)
    except AttnexpError as err:
        refusal(err)
        return None, f"non-causal refused: {short(err)}"
    if not getattr(mixer, "permutation_equivariant", False):
        return None, f"{type(mixer).__name__} does not declare permutation_equivariant (a mixer with positions inside)"
    order = torch.randperm(kit.size.queries, generator=kit.gen)
    if torch.equal(order, torch.arange(kit.size.queries)):
        order = order.roll(1)  # a permutation that moves something
    worst = max(
        relative(mixer(kit.x[:, order], need_weights=w)[0], mixer(kit.x, need_weights=w)[0][:, order])
        for w in (False, True)
    )
    measured = f"largest difference between mixing permuted tokens and permuting the output {worst:.2g}"
    return (True, measured) if worst <= kit.tol else (False, f"{measured}; {equivariance_note(mixer)}")


def equivariance_note(mixer: nn.Module) -> str:
    """What a failed token layout check asks of the mixer: its declaration, and where it came from (a windowed mixer
    inherits ``permutation_equivariant = True`` from ``MultiHeadAttention``)."""
    cls = type(mixer)
    owner = next(c for c in cls.__mro__ if "permutation_equivariant" in vars(c))
    said = "declares" if owner is cls else f"inherits from {owner.__name__}"
    return (
        f"{cls.__name__} {said} permutation_equivariant = True, which says token order does not matter to it: a mixer "
        "with positions inside (a window, relative positions, a decay with distance) sets permutation_equivariant = "
        "False (this check then does not apply); one without returns its output in another layout than (B, Lq, C)"
    )


def batch_independence(kit: Kit) -> Outcome:
    """A sample's output is the same alone as in a batch, and whatever the other samples hold, in eval mode and in
    training mode (dropout off): a mixer that mixes the batch while it trains only (a batch statistic) shows there.
    A mixing is named at the line of the mixer's code where the other samples first reach sample 0."""
    changed = kit.x.clone()
    changed[1:] = kit.noise(kit.size.batch - 1, kit.size.queries, kit.size.dim)
    worst, where = {"eval": 0.0, "training": 0.0}, None
    for mode, mixer in (("eval", kit.build()), ("training", training_mode(kit.build()))):
        for w in (False, True):
            out = mixer(kit.x, need_weights=w, **kit.given)[0]
            moved = max(
                relative(mixer(kit.x[:1], need_weights=w, **kit.alone())[0], out[:1]),
                relative(mixer(changed, need_weights=w, **kit.given)[0][:1], out[:1]),
            )
            worst[mode] = max(worst[mode], moved)
            if moved > kit.tol and where is None:
                runs = tuple(partial(mixer, t, need_weights=w, **kit.given) for t in (kit.x, changed))
                where = first_differing(mixer, runs, partial(sample_zero, batch=kit.size.batch))
    largest = max(worst.values())
    measured = f"largest change of sample 0 {largest:.2g} (alone, or beside other samples"
    if largest <= kit.tol:
        return True, measured + "; eval and training mode)"
    modes = " and ".join(f"{mode} mode" for mode, v in worst.items() if v > kit.tol)
    at = f"; first in {where}" if where else "; the line cannot be told"
    return False, f"{measured}; in {modes}{at})"


def sample_zero(t: Tensor, batch: int) -> Tensor:
    """Sample 0's share of a value whose first axis holds the batch (or the batch times the heads, sample-major); a
    value with another first axis (a statistic over the batch) whole."""
    size = t.shape[0] if t.dim() else 0
    return t.narrow(0, 0, size // batch) if size and size % batch == 0 else t


def returned(call: Callable[[], tuple[Any, ...]], part: int) -> Any:
    """What ``call()`` returns at ``part`` (0: the output, 1: the weights)."""
    return call()[part]
