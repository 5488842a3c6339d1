"""Multi-head attention with a swappable score rule.

The projections, head split/merge and masking are written once in
:class:`MultiHeadAttention`; a variant only says how a query scores a key.
Masks are boolean and broadcast to ``(B, H, Lq, Lk)``: ``True`` means "may attend".
"""

from __future__ import annotations

import functools
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnexp.attention.euclid_tiled import finite_sqrt, tiled_euclid_attention
from attnexp.errors import divisors


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
                f"channels. Pick heads from {divisors(dim)}."
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

    def full_mask(self, mask: Tensor | None, q: Tensor, k: Tensor) -> Tensor | None:
        """The caller's mask, combined with the causal mask if the layer is causal."""
        if not self.causal:
            return mask
        tri = causal_mask(q.shape[-2], k.shape[-2], q.device)
        return tri if mask is None else mask & tri

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Explicit path: softmax(score) @ v, see :func:`softmax_attention`."""
        dropout = self.dropout if self.training else 0.0
        out, weights = softmax_attention(self.score(q.float(), k.float()), v, self.full_mask(mask, q, k), dropout)
        return out, weights if need_weights else None


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


class DotAttention(MultiHeadAttention):
    """Scaled dot-product attention: softmax(q.k / sqrt(d)) v."""

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ k.transpose(-2, -1)) * self.head_dim**-0.5

    def attend(self, q, k, v, mask, need_weights):
        if need_weights:
            return super().attend(q, k, v, mask, need_weights)
        mask = None if mask is None else self.full_mask(mask, q, k)
        dropout = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=self.causal and mask is None)
        return zero_empty_rows(out, mask), None


class MaskedAttention(DotAttention):
    """Causal dot-product attention: token i attends to tokens <= i."""

    def __init__(self, dim: int, heads: int = 1, dropout: float = 0.0, bias: bool = True, out_proj: bool = True) -> None:
        super().__init__(dim, heads, dropout, bias, out_proj, causal=True)


class EuclidAttention(MultiHeadAttention):
    """Scaled Euclidean-distance attention: softmax(1 / (||q - k|| * d^-0.5 + eps)) v.

    Distances use ||q||^2 + ||k||^2 - 2 q.k (one matmul), clamped at zero. Where
    the distance is exactly zero the score is 1/eps and the gradient is kept
    finite, so a key identical to the query takes (almost) all the weight.
    Paths, all giving the explicit formula's numbers (see :func:`euclid_path`):
    for large score matrices FlexAttention on GPU or the tiled kernel with its own
    backward pass (:mod:`attnexp.attention.euclid_tiled`); the explicit formula
    otherwise and whenever the weights are requested.
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
        return euclid_score(q, k, self.head_dim**-0.5, self.eps)

    def attend(self, q, k, v, mask, need_weights):
        path = euclid_path(q, k, need_weights, self.dropout if self.training else 0.0)
        if path == "explicit":
            return super().attend(q, k, v, mask, need_weights)
        fn = flex_euclid_attention if path == "flex" else tiled_euclid_attention
        return fn(q, k, v, self.full_mask(mask, q, k), self.head_dim**-0.5, self.eps), None


TILED_MIN_SCORES = 256 * 256  # below this many scores per head the explicit formula is as fast and compiles nothing


def euclid_path(q: Tensor, k: Tensor, need_weights: bool, dropout: float) -> str:
    """``explicit`` when weights are requested, dropout is on or the score matrix is small;
    else ``flex`` where its backward runs and its kernel takes the head dim (GPU, power of 2
    from 16), else ``tiled``."""
    if need_weights or dropout > 0 or q.shape[-2] * k.shape[-2] < TILED_MIN_SCORES:
        return "explicit"
    d = q.shape[-1]
    return "flex" if q.is_cuda and d >= 16 and d & (d - 1) == 0 else "tiled"


def euclid_score(q: Tensor, k: Tensor, scale: float, eps: float) -> Tensor:
    """1 / (||q - k|| * scale + eps).  # (..., Lq, Lk)"""
    return 1.0 / (pairwise_distance(q, k) * scale + eps)


def pairwise_distance(q: Tensor, k: Tensor) -> Tensor:
    """Euclidean distance between every query and key row.  # (..., Lq, Lk)"""
    sq = (q * q).sum(-1, keepdim=True) + (k * k).sum(-1).unsqueeze(-2) - 2.0 * (q @ k.transpose(-2, -1))
    return finite_sqrt(sq.clamp_min(0.0))


def flex_euclid_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, eps: float, compiled: bool | None = None
) -> Tensor:
    """Euclid attention through FlexAttention: a score_mod turns the dot score q.k into
    1 / (||q - k|| * scale + eps) from per-row squared norms; O(L) memory when ``compiled``
    (default: on GPU; eager flex is the reference math). Forward-only on CPU in current torch.
    """
    from torch.nn.attention.flex_attention import flex_attention

    q_sq, k_sq = (q.float() * q.float()).sum(-1), (k.float() * k.float()).sum(-1)  # (B, H, L)
    full = None if mask is None else mask.expand(q.shape[0], q.shape[1], q.shape[-2], k.shape[-2])

    def score_mod(dot: Tensor, b: Tensor, h: Tensor, i: Tensor, j: Tensor) -> Tensor:
        distance = finite_sqrt(torch.clamp(q_sq[b, h, i] + k_sq[b, h, j] - 2.0 * dot, min=0.0))
        score = 1.0 / (distance * scale + eps)
        return score if full is None else torch.where(full[b, h, i, j], score, float("-inf"))

    flex = compiled_flex_attention() if (q.is_cuda if compiled is None else compiled) else flex_attention
    return zero_empty_rows(flex(q, k, v, score_mod=score_mod, scale=1.0), mask)  # (B, H, Lq, D)


@functools.cache
def compiled_flex_attention() -> Callable[..., Tensor]:
    """``flex_attention`` compiled once per process (its fused kernels need ``torch.compile``).

    Static shapes: recompiling the CPU kernel for a new length with dynamic shapes fails in torch 2.15.
    """
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)
