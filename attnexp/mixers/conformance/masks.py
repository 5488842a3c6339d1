"""Checks of what a mixer may not see: later tokens under a causal mask, padded keys, and rows that see nothing. The
first two are checked at the parameters the constructor gives and at parameters training can reach (:func:`reached`):
a convolution that starts as the identity hides a leak until it moves."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers.conformance.kit import TOL, Kit, Outcome, moved, refusal, relative, short
from attnexp.mixers.contract import DISTRIBUTIONS, weight_kind
from attnexp.mixers.frames import Origin
from attnexp.mixers.tracing import computed_at, first_differing

MOVED = 8  # the causal check changes the tokens from at most this many positions on, spread over the length
DRAWS = 3  # draws of moved parameters the leak and padding checks run at, after the constructor's
REFUSED = ("causal refused", "masks refused")  # measures of a mixer that takes no part: nothing to move
UNTOLD = (
    "the line cannot be told: the later tokens come in through values without an axis of the tokens (a chunk's or "
    "a step's state)"
)


def causal_leak(kit: Kit) -> Outcome:
    """Asked to be causal, no output moves when a later token changes, at the constructor's parameters and at moved
    ones; a leak is named at the line of the mixer's code where a later token first reaches an earlier one."""
    return reached(kit, causal_change, "it leaks")


def causal_change(kit: Kit) -> Outcome:
    """The largest change of an earlier output when later tokens change, and where the first leak comes in."""
    try:
        mixer = kit.build(causal=True)
    except AttnexpError as err:
        refusal(err)
        return True, f"causal refused: {short(err)}"
    s, worst, leaks, where = kit.size, 0.0, [], None
    starts = sorted(
        {round(1 + i * (s.queries - 2) / max(MOVED - 1, 1)) for i in range(MOVED)} & set(range(1, s.queries))
    )
    for w in (False, True):
        out = mixer(kit.x, need_weights=w, **kit.given)[0]
        for t in starts:
            later = kit.x.clone()
            later[:, t:] += kit.noise(s.batch, s.queries - t, s.dim)
            change = relative(mixer(later, need_weights=w, **kit.given)[0][:, :t], out[:, :t])
            worst = max(worst, change)
            if change > kit.tol:
                leaks.append(t)
                runs = tuple(partial(mixer, tokens, need_weights=w, **kit.given) for tokens in (kit.x, later))
                where = where or first_moved(mixer, runs, s.queries, t)
    leak = f" (tokens from {min(leaks)} on move earlier outputs" if leaks else ""
    if leaks:
        leak += f"; first in {where})" if where else f"; {UNTOLD})"
    return worst <= kit.tol, f"largest change of an earlier output {worst:.2g}{leak}"


def reached(kit: Kit, check: Callable[[Kit], Outcome], leaks: str) -> Outcome:
    """``check`` at the constructor's parameters, then (where it passed) at :data:`DRAWS` draws of parameters moved
    from them by noise of each one's own scale (:func:`~attnexp.mixers.conformance.kit.moved`); a failure found only
    there says so."""
    ok, measured = check(kit)
    if not ok or kit.start is not None or measured.startswith(REFUSED):
        return ok, measured
    for draw in range(DRAWS):
        moved_ok, moved_measured = check(kit.at(moved(kit.seed, draw)))
        if not moved_ok:
            return False, (
                f"{leaks} once its parameters move from their initial values: {moved_measured} (draw {draw + 1} of "
                f"{DRAWS}, each parameter moved by noise of its own scale)"
            )
    return True, f"{measured}; as small at {DRAWS} draws of parameters moved from the initial ones"


def first_moved(mixer: nn.Module, runs: tuple[Callable[[], Any], ...], length: int, cut: int) -> Origin | None:
    """Where, inside ``mixer``, a value of the positions before ``cut`` first moves between two runs whose tokens
    differ from ``cut`` on only, while the values it was computed from did not: the line at which a later token comes
    into earlier ones. Every axis of ``length`` (the tokens) is cut, so the later positions' own change is left out; a
    value with no such axis (a chunk's state, one step of a recurrence) cannot be told, and a leak that comes in
    through one is named nowhere rather than at the pad, reshape or slice that carries it on."""
    return first_differing(mixer, runs, partial(earlier, length=length, cut=cut), TOL)


def earlier(t: Tensor, length: int, cut: int) -> Tensor | None:
    """``t`` at the positions before ``cut`` along every axis of ``length``; None without such an axis."""
    axes = [axis for axis, size in enumerate(t.shape) if size == length]
    for axis in axes:
        t = t.narrow(axis, 0, cut)
    return t if axes else None


def padding_invisible(kit: Kit) -> Outcome:
    """Keys a padding mask hides move no output of a query that may not see them, whatever those keys hold and
    however many there are (:data:`PADDED` more): in self-attention (padding after the tokens), in causal
    self-attention, a decoder's (padding before them, where later queries could see it) and in cross-attention; at
    the constructor's parameters and at moved ones. A mixer that refuses masks, or one of these requests, is checked
    on the others."""
    return reached(kit, padding_change, "hidden keys leak into its outputs")


def padding_change(kit: Kit) -> Outcome:
    """The largest change of a visible output when hidden keys change in contents or number."""
    cases = {"self": hidden_in_self, "causal self": hidden_in_causal_self, "cross": hidden_in_cross}
    worst, checked, refused = 0.0, [], []
    for label, case in cases.items():
        try:
            worst = max(worst, case(kit))
            checked.append(label)
        except AttnexpError as err:
            refusal(err)
            refused.append(f"{label}: {short(err)}")
    if not checked:
        return True, f"masks refused: {refused[0].partition(': ')[2]}"
    measured = f"largest change when hidden keys change in contents or number ({', '.join(checked)}-attention)"
    return worst <= kit.tol, f"{measured} {worst:.2g}" + (f"; refused: {'; '.join(refused)}" if refused else "")


def given_padding_hidden(kit: Kit) -> Outcome:
    """The keys a run's own padding mask hides (its call's ``mask`` (B, 1, 1, Lk), :attr:`Kit.given`) move no output
    of a visible query, whatever they hold: in self-attention the hidden tokens (their own rows left out), in
    cross-attention the hidden context tokens. Where the batch pads nothing the check does not apply."""
    mask = kit.given.get("mask")
    if mask is None or mask.dim() != 4 or mask.shape[-2] != 1 or bool(mask.all()):
        return None, "no padded keys in this batch"
    hidden = ~mask[:, 0, 0]  # (B, Lk)
    mixer = kit.build()
    out = mixer(kit.x, **kit.given)[0]
    context = kit.given.get("context")
    if context is None:
        tokens = torch.where(hidden[..., None], kit.noise(*kit.x.shape).to(kit.x.dtype), kit.x)
        changed, rows = mixer(tokens, **kit.given)[0], ~hidden
    else:
        moved_context = torch.where(hidden[..., None], kit.noise(*context.shape).to(context.dtype), context)
        changed = mixer(kit.x, **{**kit.given, "context": moved_context})[0]
        rows = torch.ones(out.shape[:2], dtype=torch.bool, device=out.device)
    worst = relative(changed[rows], out[rows])
    padded = int(hidden.sum())
    return worst <= kit.tol, f"largest change of a visible output when the {padded} padded keys change {worst:.2g}"


PADDED = (1, 3)  # how many more hidden keys the padding check adds


def hidden_in_self(kit: Kit) -> float:
    return hidden_in_tokens(kit, causal=False)


def hidden_in_causal_self(kit: Kit) -> float:
    return hidden_in_tokens(kit, causal=True)


def hidden_in_tokens(kit: Kit, causal: bool) -> float:
    """The largest change of a visible token's output when the tokens its mask hides change, and when more hidden
    tokens join (after the tokens; before them when causal, so that every later query could see them)."""
    s = kit.size
    mixer, mask = kit.build(causal=causal), kit.padding_mask(s.queries, front=causal)
    hidden = ~mask.view(s.batch, s.queries, 1)
    visible = ~hidden.expand_as(kit.x)
    changed = torch.where(hidden, kit.noise(*kit.x.shape), kit.x)
    padded = []  # (mixer, tokens, mask, rows) with n more hidden tokens
    for n in PADDED:
        longer = kit.build(causal=causal, num_tokens=s.queries + n)
        extra, none = kit.noise(s.batch, n, s.dim), torch.zeros(s.batch, 1, 1, n, dtype=torch.bool)
        parts, masks = ((extra, kit.x), (none, mask)) if causal else ((kit.x, extra), (mask, none))
        rows = slice(n, None) if causal else slice(None, s.queries)
        if same_parameters(mixer, longer):  # else the length decides the parameters: nothing to compare
            padded.append((longer, torch.cat(parts, 1), torch.cat(masks, -1), rows))
    worst = 0.0
    for w in (False, True):
        out = mixer(kit.x, mask=mask, need_weights=w)[0][visible]
        worst = max(worst, relative(mixer(changed, mask=mask, need_weights=w)[0][visible], out))
        for longer, tokens, hides, rows in padded:
            worst = max(worst, relative(longer(tokens, mask=hides, need_weights=w)[0][:, rows][visible], out))
    return worst


def hidden_in_cross(kit: Kit) -> float:
    """The largest change of an output when the context tokens its mask hides change, and when more hidden ones are
    appended."""
    s = kit.size
    cross, mask = kit.build(num_tokens=s.keys, causal=False), kit.padding_mask(s.keys)
    context = torch.where(~mask.view(s.batch, s.keys, 1), kit.noise(s.batch, s.keys, s.dim), kit.context)
    padded = []
    for n in PADDED:
        longer = kit.build(num_tokens=s.keys + n, causal=False)
        more = torch.cat([kit.context, kit.noise(s.batch, n, s.dim)], 1)
        masks = torch.cat([mask, torch.zeros(s.batch, 1, 1, n, dtype=torch.bool)], -1)
        if same_parameters(cross, longer):
            padded.append((longer, more, masks))
    worst = 0.0
    for w in (False, True):
        out = cross(kit.x, context=kit.context, mask=mask, need_weights=w)[0]
        worst = max(worst, relative(cross(kit.x, context=context, mask=mask, need_weights=w)[0], out))
        for longer, more, masks in padded:
            worst = max(worst, relative(longer(kit.x, context=more, mask=masks, need_weights=w)[0], out))
    return worst


def same_parameters(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    """Whether two mixers hold parameters of the same names and shapes (built after one seed: the same values)."""
    shapes = [{name: p.shape for name, p in m.state_dict().items()} for m in (a, b)]
    return shapes[0] == shapes[1]


def fully_masked_rows(kit: Kit) -> Outcome:
    """A query that may see no key gives finite numbers; for weights that are distributions (softmax-like) exactly zero
    weights and, without an output projection, a zero output."""
    mask = kit.sees_nothing(kit.size.queries)
    try:
        mixer = kit.build(out_proj=False)
        outs = [mixer(kit.x, mask=mask, need_weights=w) for w in (False, True)]
    except AttnexpError as err:
        refusal(err)
        return True, f"masks or out_proj=False refused: {short(err)}"
    nonfinite = sum(int((~torch.isfinite(o)).sum()) for o, _ in outs)
    if nonfinite:
        return False, f"{nonfinite} NaN or infinite outputs{computed_at(mixer, lambda: mixer(kit.x, mask=mask), True)}"
    kind = weight_kind(mixer)
    if kind != DISTRIBUTIONS:
        return True, f"outputs finite (weights {kind}: no zeros asked)"
    largest = max(float(o[0].abs().max()) for o, _ in outs)
    weights = outs[1][1]
    if weights is not None and weights.dim() == 4:
        largest = max(largest, float(weights[0].abs().max()))
    return (
        largest == 0.0,
        f"outputs finite, largest output or weight of a fully masked row {largest:.2g} (0 for a softmax)",
    )
