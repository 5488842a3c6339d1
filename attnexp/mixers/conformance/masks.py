"""Checks of what a mixer may not see: later tokens under a causal mask, padded keys, and rows that see nothing."""

from __future__ import annotations

import torch

from attnexp.errors import AttnexpError
from attnexp.mixers.conformance.kit import TOL, Kit, Outcome, relative, short
from attnexp.mixers.contract import DISTRIBUTIONS, weight_kind

MOVED = 8  # the causal check changes the tokens from at most this many positions on, spread over the length


def causal_leak(kit: Kit) -> Outcome:
    """Asked to be causal, no output moves when a later token changes."""
    try:
        mixer = kit.build(causal=True)
    except AttnexpError as err:
        return True, f"causal refused: {short(err)}"
    s, worst, leaks = kit.size, 0.0, []
    starts = sorted(
        {round(1 + i * (s.queries - 2) / max(MOVED - 1, 1)) for i in range(MOVED)} & set(range(1, s.queries))
    )
    for w in (False, True):
        out = mixer(kit.x, need_weights=w)[0]
        for t in starts:
            later = kit.x.clone()
            later[:, t:] += kit.noise(s.batch, s.queries - t, s.dim)
            change = relative(mixer(later, need_weights=w)[0][:, :t], out[:, :t])
            worst = max(worst, change)
            if change > TOL:
                leaks.append(t)
    leak = f" (tokens from {min(leaks)} on move earlier outputs)" if leaks else ""
    return worst <= TOL, f"largest change of an earlier output {worst:.2g}{leak}"


def padding_invisible(kit: Kit) -> Outcome:
    """Changing the keys a padding mask hides moves no output of a query that may see them (self- and
    cross-attention)."""
    s, mask = kit.size, kit.padding_mask(kit.size.queries)
    try:
        mixer = kit.build()
        mixer(kit.x, mask=mask)
    except AttnexpError as err:
        return True, f"masks refused: {short(err)}"
    hidden = ~mask.view(s.batch, s.queries, 1)
    changed = torch.where(hidden, kit.noise(s.batch, s.queries, s.dim), kit.x)
    visible = ~hidden.expand_as(kit.x)
    worst = max(
        relative(
            mixer(changed, mask=mask, need_weights=w)[0][visible], mixer(kit.x, mask=mask, need_weights=w)[0][visible]
        )
        for w in (False, True)
    )
    measured = "self"
    try:
        cross, mask = kit.build(num_tokens=s.keys, causal=False), kit.padding_mask(s.keys)
        context = torch.where(~mask.view(s.batch, s.keys, 1), kit.noise(s.batch, s.keys, s.dim), kit.context)
        worst = max(
            worst,
            *(
                relative(
                    cross(kit.x, context=context, mask=mask, need_weights=w)[0],
                    cross(kit.x, context=kit.context, mask=mask, need_weights=w)[0],
                )
                for w in (False, True)
            ),
        )
        measured += " and cross"
    except AttnexpError:
        pass
    return worst <= TOL, f"largest change when hidden keys change ({measured}-attention) {worst:.2g}"


def fully_masked_rows(kit: Kit) -> Outcome:
    """A query that may see no key gives finite numbers; for weights that are distributions (softmax-like) exactly zero
    weights and, without an output projection, a zero output."""
    mask = kit.sees_nothing(kit.size.queries)
    try:
        mixer = kit.build(out_proj=False)
        outs = [mixer(kit.x, mask=mask, need_weights=w) for w in (False, True)]
    except AttnexpError as err:
        return True, f"masks or out_proj=False refused: {short(err)}"
    nonfinite = sum(int((~torch.isfinite(o)).sum()) for o, _ in outs)
    if nonfinite:
        return False, f"{nonfinite} NaN or infinite outputs"
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
