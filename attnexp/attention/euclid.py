"""Scaled Euclidean-distance attention (``model=euclid``) and the choice of the path that computes it."""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch
from torch import Tensor

from attnexp.attention.distance import euclid_score, score
from attnexp.attention.euclid_small import small_euclid_attention
from attnexp.attention.euclid_tiled import tiled_euclid_attention
from attnexp.attention.multihead import MultiHeadAttention, zero_empty_rows
from attnexp.rules import check

TILED_MIN_SCORES = 256 * 256  # below this many scores per head the small path is as fast and compiles nothing


class EuclidAttention(MultiHeadAttention):
    """softmax(1 / (||q - k|| * d^-0.5 + eps)) v.

    Distances use ||q||^2 + ||k||^2 - 2 q.k (one matmul), clamped at zero. Where
    the distance is exactly zero the score is 1/eps and the gradient is kept
    finite, so a key identical to the query takes (almost) all the weight.
    Paths, all giving the explicit formula's numbers up to rounding (see :func:`euclid_path`):
    for small score matrices one autograd function with its own backward pass (on a CPU the
    compiled kernel of :mod:`attnexp.attention.euclid_native`, else
    :mod:`attnexp.attention.euclid_small`); for large ones FlexAttention on GPU or the
    tiled kernel (:mod:`attnexp.attention.euclid_tiled`); the explicit formula whenever
    the weights are requested or attention dropout is on.
    """

    def __init__(self, dim: int, *, eps: float = 1e-9, **options: Any) -> None:
        check("model", eps=eps)
        super().__init__(dim, **options)
        self.eps = eps

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return euclid_score(q, k, self.head_dim**-0.5, self.eps)  # (B, H, Lq, Lk)

    def attend(self, q, k, v, mask, need_weights):
        path = euclid_path(q, k, need_weights, self.dropout if self.training else 0.0)
        if path == "explicit":
            return super().attend(q, k, v, mask, need_weights)
        fn = {"small": small_euclid_attention, "flex": flex_euclid_attention, "tiled": tiled_euclid_attention}[path]
        return fn(q, k, v, self.full_mask(mask, q, k), self.head_dim**-0.5, self.eps), None  # (B, H, Lq, D)


def euclid_path(q: Tensor, k: Tensor, need_weights: bool, dropout: float) -> str:
    """``explicit`` when weights are requested or dropout is on; ``small`` (one autograd function,
    few kernels) for a small score matrix; else ``flex`` where its backward runs and its kernel
    takes the head dim (GPU, power of 2 from 16), else ``tiled``."""
    if need_weights or dropout > 0:
        return "explicit"
    if q.shape[-2] * k.shape[-2] < TILED_MIN_SCORES:
        return "small"
    d = q.shape[-1]
    return "flex" if q.is_cuda and d >= 16 and d & (d - 1) == 0 else "tiled"


def flex_euclid_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, eps: float, compiled: bool | None = None
) -> Tensor:
    """Euclid attention through FlexAttention: a score_mod turns the dot score q.k into the euclid
    score from per-row squared norms; O(L) memory when ``compiled`` (default: on GPU; eager flex is
    the reference math). Forward-only on CPU in current torch.  # (B, H, Lq, D)
    """
    from torch.nn.attention.flex_attention import flex_attention

    q_sq, k_sq = (q.float() * q.float()).sum(-1), (k.float() * k.float()).sum(-1)  # (B, H, L)
    full = None if mask is None else mask.expand(q.shape[0], q.shape[1], q.shape[-2], k.shape[-2])

    def score_mod(dot: Tensor, b: Tensor, h: Tensor, i: Tensor, j: Tensor) -> Tensor:
        z = score(dot, q_sq[b, h, i], k_sq[b, h, j], scale, eps)[2]
        return z if full is None else torch.where(full[b, h, i, j], z, float("-inf"))

    flex = compiled_flex_attention() if (q.is_cuda if compiled is None else compiled) else flex_attention
    return zero_empty_rows(flex(q, k, v, score_mod=score_mod, scale=1.0), mask)


@functools.cache
def compiled_flex_attention() -> Callable[..., Tensor]:
    """``flex_attention`` compiled once per process (its fused kernels need ``torch.compile``).

    Static shapes: recompiling the CPU kernel for a new length with dynamic shapes fails in torch 2.15.
    """
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)
