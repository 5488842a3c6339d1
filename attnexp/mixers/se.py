"""Squeeze-and-excitation channel attention (``model=se``): gates per channel from the mean over tokens."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from attnexp.mixers.contract import TokenMixer, check_inputs
from attnexp.rules import Rule, check_value

MIN_SE_UNITS = 4  # a narrower bottleneck can die: one ReLU unit gave the same gates for every input
REDUCTION = Rule(int, lambda v: v > 0, "a positive integer (the se bottleneck is width / reduction units)", "4")


class SqueezeExcitation(TokenMixer):
    """Squeeze-and-excitation channel attention over a token sequence.

    Squeeze: mean over tokens (a running mean over the prefix when ``causal``,
    so no token sees later ones; over the prefix's visible tokens under a padding mask).
    Excite: a bottleneck MLP of ``dim // reduction`` units, but at least
    :data:`MIN_SE_UNITS` (or ``dim`` when narrower), then a sigmoid gate. The gates
    rescale every token's channels and are returned as the "attention weights": (B, C),
    or (B, L, C) when causal.

    With a ``context`` (the cross-attention of an encoder-decoder) the mean is taken over the context's
    tokens, so every token of ``x`` gets the same gates: se cannot choose a position of the context. A
    ``mask`` is read as a key padding mask: the mean is over the tokens some query may attend to.
    """

    permutation_equivariant = True  # the mean over tokens does not see their order

    def __init__(self, dim: int, *, reduction: int = 4, **request: Any) -> None:
        super().__init__(dim, **request)
        check_value("model.reduction", reduction, REDUCTION)
        hidden = max(dim // reduction, min(dim, MIN_SE_UNITS))
        self.causal = self.request.causal
        self.excite = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, dim), nn.Sigmoid())

    def forward(
        self, x: Tensor, context: Tensor | None = None, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        check_inputs(x, x if context is None else context, mask)
        if self.causal and context is None:
            keep = visible(x, mask)  # (B, L, 1)
            squeezed = (x * keep).cumsum(dim=1) / keep.cumsum(dim=1).clamp_min(1.0)  # (B, L, C)
            gates = self.excite(squeezed)  # (B, L, C)
            out = x * gates
        else:
            gates = self.excite(masked_mean(x if context is None else context, mask))  # (B, C)
            out = x * gates.unsqueeze(1)
        return out, gates if need_weights else None


def masked_mean(x: Tensor, mask: Tensor | None) -> Tensor:
    """Mean over the tokens of ``x`` (B, L, C) that some query may attend to under ``mask`` (broadcast to
    (B, H, Lq, L)), or over all of them.  # (B, C)"""
    if mask is None:
        return x.mean(dim=1)
    keep = visible(x, mask)
    return (x * keep).sum(1) / keep.sum(1).clamp_min(1.0)


def visible(x: Tensor, mask: Tensor | None) -> Tensor:
    """1 for each token of ``x`` (B, L, C) some query may attend to under ``mask``, 0 for a hidden one (padding);
    all ones without a mask.  # (B, L, 1)"""
    if mask is None:
        return torch.ones(*x.shape[:2], 1, device=x.device, dtype=x.dtype)
    return mask.reshape(mask.shape[0], -1, mask.shape[-1]).any(1).unsqueeze(-1).to(x.dtype)
