"""Euclid attention computed tile by tile, with a hand-written backward pass.

softmax(1 / (||q - k|| * scale + eps)) v never exists as a whole (B, H, Lq, Lk) matrix: the
forward pass walks over tiles of queries (every key of a tile's queries at once) and keeps
nothing but q, k, v and a view of the mask; the backward pass recomputes each tile's softmax from q.k in the
keys-by-queries layout (so every matmul reads its operands in the order BLAS is fastest at)
and adds up dq, dk, dv. A tile's element-wise work is fused by ``torch.compile`` (compiled on
first use, cached across runs). Memory is O(tile), like flash attention.

Gradients (g is dLoss/d(squared distance), a tile's worth at a time)::

    dz = p * (dp - rowsum(p * dp))                softmax backward
    g  = dz * -scale * z^2 / (2 * distance)       0 where the distance is 0 (finite sqrt)
    dq = 2 * (rowsum(g) * q - g k)      dk = 2 * (colsum(g) * k - g^T q)      dv = p^T dout
"""

from __future__ import annotations

import warnings
from typing import Callable

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from attnexp.attention.distance import TINY, score

CPU_TILE_SCORES = 1 << 17  # scores per tile (512 KiB of float32): a tile and its siblings stay in a core's cache
GPU_TILE_SCORES = 1 << 24  # on a GPU: few, large tiles (few kernel launches)


def masked_top(z: Tensor, mask: Tensor | None, dim: int) -> tuple[Tensor, Tensor]:
    """Logits with masked scores at -inf, and each query's top logit (0 for a fully masked query)."""
    logits = z if mask is None else z.masked_fill(~mask, float("-inf"))
    top = logits.amax(dim, keepdim=True)
    return logits, torch.where(top == float("-inf"), 0.0, top)


def tile_logits(dot: Tensor, q_sq: Tensor, k_sq: Tensor, mask: Tensor | None, scale: float, eps: float):
    """Forward pass: logits and top logit of one tile.  # dot, mask (N, C, Lk); q_sq (N, C, 1); k_sq (N, 1, Lk)"""
    return masked_top(score(dot, q_sq, k_sq, scale, eps)[2], mask, -1)


def tile_numerators(logits: Tensor, top: Tensor) -> tuple[Tensor, Tensor]:
    """Forward pass: softmax numerators and their sum per query."""
    p = (logits - top).exp()
    return p, p.sum(-1, keepdim=True)


def tile_scores(dot_t: Tensor, q_sq: Tensor, k_sq: Tensor, mask_t: Tensor | None, scale: float, eps: float):
    """Backward pass, keys-by-queries layout: logits, top logit and dz/d(squared distance)
    = -scale * z^2 / (2 * distance), 0 where the square root has gradient 0.

    dot_t, mask_t: (N, Lk, C) (mask_t may broadcast); q_sq: (N, 1, C); k_sq: (N, Lk, 1).
    """
    squared, distance, z = score(dot_t, q_sq, k_sq, scale, eps)
    slope = torch.where(squared > TINY, z * z * (-0.5 * scale) / distance.clamp_min(TINY), 0.0)
    return *masked_top(z, mask_t, -2), slope


def tile_grads(logits: Tensor, top: Tensor, slope: Tensor, dp_t: Tensor):
    """Backward pass: softmax p^T and g^T (dLoss/d squared distance) of one tile, with g's sums over keys and over queries.

    The tile holds every key of its queries, so the softmax is recomputed whole here rather than
    from the forward pass's row statistics: near distance 0 the score 1/eps amplifies rounding
    differences between the two passes' matmuls.
    """
    p_t = (logits - top).exp()
    p_t = p_t / p_t.sum(-2, keepdim=True).clamp_min(torch.finfo(p_t.dtype).tiny)
    g_t = p_t * (dp_t - (p_t * dp_t).sum(-2, keepdim=True)) * slope
    return p_t, g_t, g_t.sum(-2, keepdim=True), g_t.sum(-1, keepdim=True)


def fused(fn: Callable) -> Callable:
    """``fn`` compiled by ``torch.compile`` at its first call (importing the compiler takes over a second,
    which runs that never reach a tile should not pay); where compiling fails (no C++ compiler, say),
    ``fn`` itself, after one warning: slower, same numbers."""
    compiled: Callable | None = None

    def call(*args):
        nonlocal compiled
        if compiled is None:
            compiled = torch.compile(fn)
        try:
            return compiled(*args)
        except torch._dynamo.exc.BackendCompilerFailed as error:
            warnings.warn(f"torch.compile failed for {fn.__name__}, running it uncompiled (slower): {error}", stacklevel=2)
            compiled = fn
            return fn(*args)

    return call


# Each is one or two fused loops over a cached tile; z is materialised once per pass rather than recomputed per loop.
_tile_logits, _tile_numerators = fused(tile_logits), fused(tile_numerators)
_tile_scores, _tile_grads = fused(tile_scores), fused(tile_grads)


def squared_norms(x: Tensor) -> Tensor:
    """||x||^2 of every row, without an (N, L, D) temporary.  # (N, L, D) -> (N, L)"""
    return torch.linalg.vecdot(x, x)


def tiles(q: Tensor, keys: int):
    """(group slice, query slice) pairs covering q's (N, Lq), each tile about CPU/GPU_TILE_SCORES scores.

    A tile holds several groups only when it holds all their queries, so ``t[g, r]`` of a
    contiguous (N, Lq, D) tensor is contiguous (a valid ``out=``)."""
    groups, queries = q.shape[:2]
    budget = CPU_TILE_SCORES if q.device.type == "cpu" else GPU_TILE_SCORES
    rows = max(1, min(queries, budget // keys))
    per = max(1, min(groups, budget // (rows * keys)))
    for g in range(0, groups, per):
        for r in range(0, queries, rows):
            yield slice(g, min(g + per, groups)), slice(r, min(r + rows, queries))


def mask_tile(mask: Tensor | None, heads: int, g: slice, r: slice) -> Tensor | None:
    """Query rows ``r`` of the flattened (batch * head) groups ``g`` of a mask broadcast to
    (B, H, Lq, Lk): only the tile is copied, the mask is never expanded whole.  # (n, c, Lk)"""
    if mask is None:
        return None
    n = torch.arange(g.start, g.stop, device=mask.device)
    return mask[:, :, r][n // heads, n % heads]


class TiledEuclidAttention(torch.autograd.Function):
    """Tiled euclid attention on (N, L, D) float32 tensors, N = batch * heads; ``mask`` a bool
    (B, H, Lq, Lk) view (broadcast dims of stride 0) or None."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, heads: int, scale: float, eps: float) -> Tensor:
        q_sq, k_sq = squared_norms(q).unsqueeze(-1), squared_norms(k).unsqueeze(-2)  # (N, Lq, 1), (N, 1, Lk)
        out = q.new_empty(q.shape[:-1] + v.shape[-1:])  # (N, Lq, Dv)
        for g, r in tiles(q, k.shape[1]):
            dot = torch.bmm(q[g, r], k[g].transpose(1, 2))  # (n, c, Lk)
            p, total = _tile_numerators(*_tile_logits(dot, q_sq[g, r], k_sq[g], mask_tile(mask, heads, g, r), scale, eps))
            torch.bmm(p, v[g], out=out[g, r]).div_(total.clamp_min(torch.finfo(total.dtype).tiny))
        ctx.save_for_backward(q, k, v, mask, q_sq, k_sq)
        ctx.heads, ctx.scale, ctx.eps = heads, scale, eps
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout: Tensor):
        with torch.autocast(dout.device.type, enabled=False):  # a backward called under autocast stays float32
            return TiledEuclidAttention._backward(ctx, dout.float().contiguous())

    @staticmethod
    def _backward(ctx, dout: Tensor):
        q, k, v, mask, q_sq, k_sq = ctx.saved_tensors
        q_sq, k_sq = q_sq.transpose(1, 2), k_sq.transpose(1, 2)  # (N, 1, Lq), (N, Lk, 1)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        g_keys = torch.zeros_like(k_sq)  # colsum(g): (N, Lk, 1)
        for g, r in tiles(q, k.shape[1]):
            dot_t = torch.bmm(k[g], q[g, r].transpose(1, 2))  # (n, Lk, c)
            dp_t = torch.bmm(v[g], dout[g, r].transpose(1, 2))  # (n, Lk, c)
            mask_t = mask_tile(mask, ctx.heads, g, r)
            mask_t = None if mask_t is None else mask_t.transpose(1, 2)
            scores = _tile_scores(dot_t, q_sq[g, :, r], k_sq[g], mask_t, ctx.scale, ctx.eps)
            p_t, g_t, g_rows, g_cols = _tile_grads(*scores, dp_t)
            first = 0.0 if r.start == 0 else 1.0  # the first row tile of a group writes dk, dv; the others add
            dv[g].baddbmm_(p_t, dout[g, r], beta=first)
            dk[g].baddbmm_(g_t, q[g, r], beta=first, alpha=-1.0)
            g_keys[g] += g_cols
            torch.mul(q[g, r], g_rows.transpose(1, 2), out=dq[g, r]).baddbmm_(g_t.transpose(1, 2), k[g], alpha=-1.0)
        return dq.mul_(2.0), dk.addcmul_(g_keys, k).mul_(2.0), dv, None, None, None, None


@torch.compiler.disable  # a compiled network calls it as is: its tiles are compiled already, unrolling them would not pay
def tiled_euclid_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, eps: float) -> Tensor:
    """Euclid attention for (B, H, L, D) inputs through :class:`TiledEuclidAttention`, in float32.

    ``mask`` broadcasts to (B, H, Lq, Lk), True = may attend; a fully masked query gives zeros.
    """
    b, h, lq, _ = q.shape
    flat = [t.float().reshape(b * h, t.shape[-2], t.shape[-1]) for t in (q, k, v)]  # (N, L, D)
    if mask is not None:
        mask = mask.expand(b, h, lq, k.shape[-2])  # a view: broadcast dims keep stride 0
    with torch.autocast(q.device.type, enabled=False):
        out = TiledEuclidAttention.apply(*flat, mask, h, scale, eps)
    return out.view(b, h, lq, -1).to(v.dtype)  # (B, H, Lq, Dv)
