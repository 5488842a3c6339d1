"""Multi-head attention with a swappable score rule.

The projections, head split/merge and masking are written once in
:class:`MultiHeadAttention`; a variant only says how a query scores a key.
Masks are boolean and broadcast to ``(B, H, Lq, Lk)``: ``True`` means "may attend".
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def causal_mask(queries: int, keys: int | None = None, device: torch.device | None = None) -> Tensor:
    """Lower-triangular boolean mask: query i sees keys <= i.  # (Lq, Lk)"""
    keys = queries if keys is None else keys
    return torch.ones(queries, keys, dtype=torch.bool, device=device).tril()


class MultiHeadAttention(nn.Module):
    """Shared multi-head plumbing: q/k/v projections, heads, mask, output projection.

    Subclasses override :meth:`score` (explicit path) and may override
    :meth:`attend` with a fused kernel that gives the same numbers.
    ``context`` (keys and values) defaults to ``x``, so cross-attention works.
    """

    def __init__(
        self,
        dim: int,
        heads: int = 1,
        dropout: float = 0.0,
        bias: bool = True,
        out_proj: bool = True,
        causal: bool = False,
    ) -> None:
        super().__init__()
        if heads < 1 or heads > dim:
            raise ValueError(f"heads must be between 1 and dim={dim}, got heads={heads}.")
        if dim % heads:
            raise ValueError(
                f"dim={dim} is not divisible by heads={heads}: each head needs dim/heads "
                f"channels. Pick heads from {[h for h in range(1, dim + 1) if dim % h == 0]}."
            )
        self.dim, self.heads, self.head_dim = dim, heads, dim // heads
        self.dropout, self.causal = dropout, causal
        self.q_proj = nn.Linear(dim, dim, bias=bias)
        self.k_proj = nn.Linear(dim, dim, bias=bias)
        self.v_proj = nn.Linear(dim, dim, bias=bias)
        self.out_proj = nn.Linear(dim, dim, bias=bias) if out_proj else nn.Identity()

    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``x`` (B, Lq, C) to ``context`` (B, Lk, C); return (out, weights)."""
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

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Explicit path: softmax(score) @ v, masked positions get exactly zero weight.

        Scores and softmax run in float32 so large logits (euclid's 1/eps) never
        overflow under mixed precision; a fully masked row yields zeros, not NaN.
        """
        scores = self.score(q.float(), k.float())  # (B, H, Lq, Lk)
        if self.causal:
            tri = causal_mask(q.shape[-2], k.shape[-2], q.device)
            mask = tri if mask is None else mask & tri
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        weights = weights.to(v.dtype)
        out = F.dropout(weights, self.dropout, self.training) @ v  # (B, H, Lq, D)
        return out, weights if need_weights else None


class DotAttention(MultiHeadAttention):
    """Scaled dot-product attention: softmax(q.k / sqrt(d)) v."""

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ k.transpose(-2, -1)) * self.head_dim**-0.5

    def attend(self, q, k, v, mask, need_weights):
        if need_weights:
            return super().attend(q, k, v, mask, need_weights)
        if self.causal and mask is not None:
            return super().attend(q, k, v, mask, need_weights)
        dropout = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=self.causal)
        if mask is not None:  # rows with nothing to attend to give zeros, as on the explicit path
            out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
        return out, None


class MaskedAttention(DotAttention):
    """Causal dot-product attention: token i attends to tokens <= i."""

    def __init__(self, dim: int, heads: int = 1, dropout: float = 0.0, bias: bool = True, out_proj: bool = True) -> None:
        super().__init__(dim, heads, dropout, bias, out_proj, causal=True)


class EuclidAttention(MultiHeadAttention):
    """Scaled Euclidean-distance attention: softmax(1 / (||q - k|| * d^-0.5 + eps)) v.

    Distances use ||q||^2 + ||k||^2 - 2 q.k (one matmul), clamped at zero. Where
    the distance is exactly zero the score is 1/eps and the gradient is kept
    finite, so a key identical to the query takes (almost) all the weight.
    """

    def __init__(
        self,
        dim: int,
        heads: int = 1,
        dropout: float = 0.0,
        bias: bool = True,
        out_proj: bool = True,
        causal: bool = False,
        eps: float = 1e-9,
    ) -> None:
        if not eps > 0:
            raise ValueError(f"euclid attention needs eps > 0 (the score is 1/(distance + eps)), got eps={eps}.")
        super().__init__(dim, heads, dropout, bias, out_proj, causal)
        self.eps = eps

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return 1.0 / (pairwise_distance(q, k) * self.head_dim**-0.5 + self.eps)


def pairwise_distance(q: Tensor, k: Tensor) -> Tensor:
    """Euclidean distance between every query and key row.  # (..., Lq, Lk)"""
    sq = (q * q).sum(-1, keepdim=True) + (k * k).sum(-1).unsqueeze(-2) - 2.0 * (q @ k.transpose(-2, -1))
    sq = sq.clamp_min(0.0)
    positive = sq > 0
    # sqrt has an infinite slope at 0: take it only where the distance is positive.
    return torch.where(positive, sq.clamp_min(1e-30).sqrt(), torch.zeros_like(sq))
