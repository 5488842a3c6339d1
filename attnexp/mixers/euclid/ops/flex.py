"""Euclid attention through FlexAttention (GPUs): a ``score_mod`` turns the dot product into the euclid score.

Flex never holds the (Lq, Lk) scores, so it cannot see which pairs need their distance from the difference
(:mod:`~attnexp.mixers.euclid.formula`); a tiled pass over the expansion finds the rows that may, and those rows
are recomputed with the explicit formula and put in place of flex's, their gradients flowing through it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from attnexp.mixers.euclid.formula import exact_rows, finite_sqrt, near_rows
from attnexp.mixers.multihead import zero_empty_rows

ROW_TILE_SCORES = 1 << 24  # scores per tile of the pass that looks for near rows


def row_minima(q: Tensor, k: Tensor, s2: float, q_sq: Tensor, k_sq: Tensor) -> Tensor:
    """Each query's smallest scaled squared distance by the expansion, a tile of rows at a time.  # (B, H, Lq, 1)"""
    rows = max(1, ROW_TILE_SCORES // max(1, q.shape[0] * q.shape[1] * k.shape[-2]))
    parts = []
    for r in range(0, q.shape[-2], rows):
        x = torch.matmul(q[..., r : r + rows, :], k.transpose(-2, -1)).mul_(-2.0 * s2).add_(k_sq.unsqueeze(-2)).add_(q_sq[..., r : r + rows, None])
        parts.append(x.amin(-1, keepdim=True))
    return torch.cat(parts, dim=-2)


def exact_attention_rows(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, rows: tuple[Tensor, ...], scale: float, eps: float) -> Tensor:
    """The explicit formula for the query rows ``rows`` (indices into (B, H, Lq)), distances from the differences.  # (m, Dv)"""
    z = 1.0 / (finite_sqrt(exact_rows(q, k, rows, scale)) + eps)  # (m, Lk)
    if mask is not None:
        allowed = mask.expand(*q.shape[:-1], k.shape[-2])[rows]
        z = z.masked_fill(~allowed, float("-inf"))
    weights = zero_empty_rows(z.softmax(-1).unsqueeze(-2), None if mask is None else allowed.unsqueeze(-2))
    return (weights @ v[rows[:-1]].float()).squeeze(-2)


def flex_euclid_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, eps: float,
                          compiled: bool | None = None) -> Tensor:
    """Euclid attention through FlexAttention, compiled on a GPU (``compiled``: default on GPU; eager flex is the
    reference math and has no backward on a CPU).  # (B, H, Lq, Dv)"""
    from torch.nn.attention.flex_attention import flex_attention

    if q.shape[-2] == 0 or k.shape[-2] == 0:  # no query, or nothing to attend to: as SDPA
        return v.new_zeros(*q.shape[:-1], v.shape[-1])
    s2 = scale * scale
    qf, kf = q.float(), k.float()
    q_sq, k_sq = (qf * qf).sum(-1) * s2, (kf * kf).sum(-1) * s2  # (B, H, L)
    full = None if mask is None else mask.expand(q.shape[0], q.shape[1], q.shape[-2], k.shape[-2])

    def score_mod(dot: Tensor, b: Tensor, h: Tensor, i: Tensor, j: Tensor) -> Tensor:
        x = (q_sq[b, h, i] + k_sq[b, h, j] - 2.0 * s2 * dot).clamp_min(0.0)
        z = 1.0 / (finite_sqrt(x) + eps)
        return z if full is None else torch.where(full[b, h, i, j], z, float("-inf"))

    flex = compiled_flex_attention() if (q.is_cuda if compiled is None else compiled) else flex_attention
    out = zero_empty_rows(flex(q, k, v, score_mod=score_mod, scale=1.0), mask)
    with torch.no_grad():
        rows = near_rows(row_minima(qf, kf, s2, q_sq, k_sq), q_sq.unsqueeze(-1) / s2, s2)
    if rows is None:
        return out
    return out.index_put(rows, exact_attention_rows(qf, kf, v, mask, rows, scale, eps).to(out.dtype))


@functools.cache
def compiled_flex_attention() -> Callable[..., Tensor]:
    """``flex_attention`` compiled once per process (its fused kernels need ``torch.compile``).

    Static shapes: recompiling for a new length with dynamic shapes fails in torch 2.15.
    """
    from torch.nn.attention.flex_attention import flex_attention

    return torch.compile(flex_attention, dynamic=False)
