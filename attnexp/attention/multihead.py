"""The multi-head plumbing every attention variant shares, and softmax attention with masks.

A variant subclasses :class:`MultiHeadAttention` and says how a query scores a key
(:meth:`~MultiHeadAttention.score`); it may override :meth:`~MultiHeadAttention.attend` with a fused
kernel that gives the same numbers. Masks are boolean and broadcast to ``(B, H, Lq, Lk)``:
``True`` means "may attend". The constructor arguments are the mixer contract's
(:mod:`attnexp.attention.contract`) plus ``dropout`` and ``bias``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnexp.attention.contract import TokenMixer
from attnexp.errors import AttnexpError, divisors
from attnexp.rules import check


def causal_mask(queries: int, keys: int | None = None, device: torch.device | None = None) -> Tensor:
    """Lower-triangular boolean mask: query i sees keys <= i.  # (Lq, Lk)"""
    keys = queries if keys is None else keys
    return torch.ones(queries, keys, dtype=torch.bool, device=device).tril()


def zero_empty_rows(t: Tensor, mask: Tensor | None) -> Tensor:
    """Zeros for queries whose keys are all masked (e.g. padding), so they give 0, not NaN.  # (B, H, Lq, *)"""
    return t if mask is None else t.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def softmax_attention(scores: Tensor, v: Tensor, mask: Tensor | None, dropout: float = 0.0) -> tuple[Tensor, Tensor]:
    """softmax(scores) @ v with masked positions at exactly zero weight; returns (out, weights).

    Scores come in float32 so large logits (euclid's 1/eps) never overflow under
    mixed precision; -inf is applied after the score, and a fully masked row
    yields zeros, not NaN.  # scores (B, H, Lq, Lk), v (B, H, Lk, D)
    """
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = zero_empty_rows(scores.softmax(dim=-1), mask).to(v.dtype)
    return F.dropout(weights, dropout, training=dropout > 0) @ v, weights  # (B, H, Lq, D)


class MultiHeadAttention(TokenMixer):
    """q/k/v projections, head split and merge, the causal mask, the output projection.

    ``context`` (keys and values) defaults to ``x``, so the same module does cross-attention.
    """

    def __init__(self, dim: int, *, dropout: float = 0.0, bias: bool = True, **request: Any) -> None:
        super().__init__(dim, **request)
        heads, causal, out_proj = self.request.heads, self.request.causal, self.request.out_proj
        check("model", heads=heads, dropout=dropout)
        if heads > dim:
            raise AttnexpError(f"heads must be between 1 and dim={dim}, got heads={heads}. Pick heads from {divisors(dim)}.")
        if dim % heads:
            raise AttnexpError(
                f"dim={dim} is not divisible by heads={heads}: each head needs dim/heads channels. "
                f"Pick heads (model.heads, or net.heads in the ViT) from {divisors(dim)}, or change the width."
            )
        self.dim, self.heads, self.head_dim = dim, heads, dim // heads
        self.dropout, self.causal = dropout, causal
        self.q_proj = nn.Linear(dim, dim, bias=bias)
        self.k_proj = nn.Linear(dim, dim, bias=bias)
        self.v_proj = nn.Linear(dim, dim, bias=bias)
        self.out_proj = nn.Linear(dim, dim, bias=bias) if out_proj else nn.Identity()

    def forward(
        self, x: Tensor, context: Tensor | None = None, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``x`` (B, Lq, C) to ``context`` (B, Lk, C); return (out, weights (B, H, Lq, Lk) or None)."""
        context = x if context is None else context
        q, k, v = (self._split(p(t)) for p, t in ((self.q_proj, x), (self.k_proj, context), (self.v_proj, context)))
        out, weights = self.attend(q, k, v, mask, need_weights)  # (B, H, Lq, D)
        out = out.transpose(1, 2).reshape(x.shape[0], x.shape[1], self.dim)  # (B, Lq, C)
        return self.out_proj(out), weights

    def _split(self, t: Tensor) -> Tensor:
        b, length, _ = t.shape
        return t.view(b, length, self.heads, self.head_dim).transpose(1, 2)  # (B, H, L, D)

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        """Attention logits before masking and softmax.  # (B, H, Lq, Lk)"""
        raise NotImplementedError

    def full_mask(self, mask: Tensor | None, q: Tensor, k: Tensor) -> Tensor | None:
        """The caller's mask, combined with the causal mask if the layer is causal."""
        if not self.causal:
            return mask
        tri = causal_mask(q.shape[-2], k.shape[-2], q.device)
        return tri if mask is None else mask & tri

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Explicit path: softmax(score) @ v, see :func:`softmax_attention`.  # (B, H, Lq, D)"""
        dropout = self.dropout if self.training else 0.0
        out, weights = softmax_attention(self.score(q.float(), k.float()), v, self.full_mask(mask, q, k), dropout)
        return out, weights if need_weights else None
