"""Euclid on a CPU outside a compiled graph: the query rows that need exact distances found by reading the data.

A CPU has no device to wait for, so reading a value costs nothing and the data can say where work is needed. The
expansion ``||q||^2 + ||k||^2 - 2 q.k`` (one matmul) is exact to a few float32 ulps of the squared norms; a query
row is recomputed whole from the differences ``q - k`` (every key exact, forward and backward) where its nearest key
by the expansion is close enough for that rounding to show:

- a squared distance at most ``ROW_NEAR`` times ``||q||^2`` (scaled): any pair the expansion resolves worse than
  ~1e-5 of its distance lies in such a row (the rule of :func:`~attnexp.mixers.euclid.formula.exact_rows`), or
- a scaled distance below 1/:data:`EXP_SAFE`, where a score could pass 64 (2^64 must not overflow a row's sum) or
  eps is no longer below float32 rounding of the distance.

Each row is decided on its own numbers (its largest score, or its smallest squared distance on the tiled path), never
once for the batch, and a NaN stays in its row. Every other row scores its keys from the expansion in one pass,
``rsqrt(x + eps^2)`` where eps <= :data:`FOLDED_EPS` (equal to 1/(d + eps) to float32 rounding there, d being at
least 1/64), and needs no shift before ``exp2`` (its scores are at most 64). Exact rows
(:mod:`~attnexp.mixers.euclid.ops.exact_rows`) take each row's largest score off before ``exp2`` and ``rowsum(p *
dp)`` from their weights (one weight may be 1 and the factor z^2 / d huge); the others take it as ``rowsum(dout *
out)``, Lq x D values, as flash attention does. Scores are in base 2, as on the fixed-shape path
(:mod:`~attnexp.mixers.euclid.ops.fixed`).

Up to ``tiles.KEEP_SCORES`` scores a call keeps its weights for the backward pass, nothing computed twice
(:mod:`~attnexp.mixers.euclid.ops.rows_kept`); beyond, its memory is of the order of its inputs': at most
:data:`MEMORY_WIDTHS` score-sized floats per value of its queries, and it goes tile by tile
(:mod:`~attnexp.mixers.euclid.ops.rows_tiles`), each tile computed once forward and once backward, as flash attention
does, keeping the augmented q and k (two columns of norms more than q and k), [v, 1], the output, the row sums and
the exact rows' queries, nothing of size Lq x Lk.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from attnexp.mixers.euclid.formula import ROW_NEAR, autocast_on, float32_math
from attnexp.mixers.euclid.ops import tiles as tiling
from attnexp.mixers.euclid.ops.exact_rows import Exact, blocked_rows, exact_weights, near_rows, tile_exact
from attnexp.mixers.euclid.ops.memory import kept_memory, tile_memory, workspace
from attnexp.mixers.euclid.ops.rows_kept import kept_forward
from attnexp.mixers.euclid.ops.rows_tiles import (
    Plan,
    TileGrads,
    augmented,
    backward_tile,
    distances,
    forward_tile,
    plan,
    tile_blocked,
    weights,
    with_ones,
)
from attnexp.mixers.euclid.ops.tiles import LN2, TileForward, blocked_tile
from attnexp.mixers.euclid.ops.tiles import backward_tile as kept_backward

EXP_SAFE = 64.0  # largest base-2 score a general row may hold: 2^64 times the keys stays far inside float32
FOLDED_EPS = 2**-24 / EXP_SAFE  # up to this eps general rows score 1/sqrt(d^2 + eps^2), 1/(d + eps) to rounding
MEMORY_WIDTHS = 3.0  # score-sized floats a tiled call holds at once: at most this many per value of its queries


def general_floor(eps: float, folded: bool) -> float:
    """Squared scaled distance (with eps^2 where folded) below which a row is computed exactly."""
    return EXP_SAFE**-2 + (eps * eps if folded else 0.0)


def memory_scores(groups: int, queries: int, width: int) -> int:
    """Score-sized floats a call may hold at once: :data:`MEMORY_WIDTHS` per value of its queries (``width``: the
    widest of q and v), so that its memory stays of the order of its inputs' whatever the lengths. A call that keeps
    its weights holds three a score (its workspace, ``e`` and ``e * z^2 / d``), a tiled one two a score of a tile."""
    return max(1, int(MEMORY_WIDTHS * groups * queries * width))


class RowsEuclid(torch.autograd.Function):
    """softmax(ln 2 / (||q - k|| * scale + eps)) v (base-2 scores: euclid's with ``scale`` and ``eps`` times ln 2) on
    (N, L, D) float32 CPU tensors, N = batch * heads, its exact rows found by reading the data; ``blocked`` a bool
    (B|1, H|1, Lq|1, Lk) view, True where a query may not attend, or None. A query with nothing to attend to gives
    zeros. A call of at most ``tiles.KEEP_SCORES`` scores keeps its weights for the backward pass
    (:mod:`~attnexp.mixers.euclid.ops.rows_kept`); a longer one goes tile by tile, each computed once forward and once
    backward (:mod:`~attnexp.mixers.euclid.ops.rows_tiles`). Eager only: a compiled graph runs
    :class:`~attnexp.mixers.euclid.ops.fixed.FixedEuclid`."""

    @staticmethod
    def forward(
        ctx, q: Tensor, k: Tensor, v: Tensor, blocked: Tensor | None, heads: int, scale: float, eps: float
    ) -> Tensor:
        n, lq, lk = q.shape[0], q.shape[1], k.shape[1]
        ctx.empty = lq == 0 or lk == 0
        if ctx.empty:  # no query, or nothing to attend to: zeros, as SDPA gives (and zero gradients)
            ctx.save_for_backward(q, k, v)
            return q.new_zeros(n, lq, v.shape[-1])
        folded, grads = eps <= FOLDED_EPS, any(ctx.needs_input_grad[:3])
        ctx.heads, ctx.scale, ctx.eps, ctx.low = heads, scale, eps, v.dtype
        budget = memory_scores(n, lq, max(q.shape[-1], v.shape[-1]))  # floats
        ctx.tiles = None
        if n * lq * lk <= tiling.KEEP_SCORES:  # one tile, its weights kept: nothing computed twice
            kept = kept_memory(ctx, q, (n, lq, lk), (n, lq, lk)) if grads else None
            mask = blocked_tile(blocked, heads, slice(0, n), slice(0, lq))
            tile = kept_forward(q, k, v, mask, scale, eps, (folded, general_floor(eps, folded)), kept)
            ctx.exact = tile.near
            ctx.save_for_backward(q, k, v, tile.out, tile.s, tile.e, tile.pw)
            return tile.out
        ctx.tiles = plan(n, lq, lk, min(tiling.CPU_TILE_SCORES, budget // 2))
        out, s, qa, ka, exact = tiled_forward(q, k, v, blocked, heads, scale, eps, ctx.tiles)
        if grads:
            ctx.save_for_backward(qa, ka, with_ones(v), out, s, blocked, *(exact or (None, None, None)))
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout: Tensor):
        if ctx.empty:
            return *(torch.zeros_like(t) for t in ctx.saved_tensors[:3]), None, None, None, None
        with float32_math("cpu") if autocast_on("cpu") else nullcontext():  # eager: autocast is on or it is not
            if ctx.tiles is None:
                q, k, v, out, s, e, pw = ctx.saved_tensors
                dout = torch.div(dout.float(), s, out=workspace(6, dout.shape, q))  # (N, Lq, Dv) / row sums
                rs = torch.linalg.vecdot(dout, out).unsqueeze_(-1)  # rowsum(p * dp) / s
                tile = TileForward(out, e, s, pw, ctx.exact)
                dq, dk, dv = kept_backward(q, k, v, tile, dout, ctx.scale, rs)
            else:
                dq, dk, dv = tiled_backward(ctx, dout)
        return dq, dk, dv if dv.dtype == ctx.low else dv.to(ctx.low), None, None, None, None


def tiled_forward(
    q: Tensor, k: Tensor, v: Tensor, blocked: Tensor | None, heads: int, scale: float, eps: float, tiles: Plan
) -> tuple[Tensor, Tensor, Tensor, Tensor, Exact | None]:
    """The output (N, Lq, Dv), the row sums (N, Lq, 1), the augmented q and k and the exact rows, tile by tile."""
    n, lq, lk = q.shape[0], q.shape[1], k.shape[1]
    s2, folded = scale * scale, eps <= FOLDED_EPS
    qa, ka, q_sq = augmented(q, k, s2, eps * eps if folded else 0.0)  # (N, L, D + 2)
    low, s, out = q.new_empty(n, lq, 1), q.new_empty(n, lq, 1), q.new_empty(n, lq, v.shape[-1])
    keys, values = tiles.groups(ka.transpose(1, 2)), tiles.groups(v)
    for i, (qa_t, low_t, s_t, out_t) in enumerate(zip(*(tiles.tiles(t) for t in (qa, low, s, out)))):
        start = tiles.start(i, qa_t)
        x = tile_memory(0, (qa_t.shape[0], start[2], lk), q)
        blocked_t = tile_blocked(blocked, heads, start, qa_t)
        g = i // tiles.chunks
        forward_tile(qa_t, keys[g], values[g], blocked_t, None if folded else eps, x, low_t, s_t, out_t)
    at = near_rows(low, q_sq.mul_(s2 * ROW_NEAR).clamp_min_(general_floor(eps, folded)))
    exact = None
    if at is not None:  # whole rows from the differences
        exact = Exact(at, at.div(lq, rounding_mode="floor"), q.reshape(-1, q.shape[-1]).index_select(0, at))
        _, e, _ = exact_weights(exact.q, k, exact.group, blocked_rows(blocked, heads, lq, at), s2, eps, False)
        s.view(-1, 1).index_copy_(0, at, e.sum(-1, keepdim=True))
        rows = torch.bmm(e.unsqueeze(1).to(v.dtype), v.index_select(0, exact.group)).view(at.shape[0], -1)
        out.view(-1, out.shape[-1]).index_copy_(0, at, rows.to(out.dtype))
    if blocked is not None:
        s = torch.where(s > 0, s, 1.0)  # a query with nothing to attend to gives zeros
    return out.div_(s), s, qa, ka, exact


def tiled_backward(ctx, dout: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The gradients of q, k and v, tile by tile, each tile's weights computed again."""
    qa, ka, va, out, s, blocked, *saved = ctx.saved_tensors
    n, lq, width, lk, dv_width = qa.shape[0], qa.shape[1], qa.shape[2] - 2, ka.shape[1], va.shape[2] - 1
    scale, eps, tiles = ctx.scale, ctx.eps, ctx.tiles
    s2, folded = scale * scale, eps <= FOLDED_EPS
    da = qa.new_empty(n, lq, dv_width + 1)  # [dout / s, -rowsum(dout / s * out)]
    torch.div(dout.float(), s, out=da.narrow(-1, 0, dv_width))
    torch.linalg.vecdot(da.narrow(-1, 0, dv_width), out, out=da.select(-1, dv_width)).neg_()
    dq, rowsum = qa.new_empty(n, lq, width), qa.new_empty(n, lq, 1)
    dk, colsum, dv = ka.new_empty(n, lk, width), ka.new_empty(n, lk), ka.new_empty(n, lk, dv_width)
    exact, bounds = None, [0] * (tiles.count + 1)
    if saved[0] is not None:
        exact = Exact(*saved)  # ascending: tile by tile
        bounds = [0, *torch.bincount(tiles.tile_of(exact.at), minlength=tiles.count).cumsum(0).tolist()]
    views = zip(*(tiles.tiles(t) for t in (qa, da, dq, rowsum)))
    keys, keys_t, values = tiles.groups(ka), tiles.groups(ka.transpose(1, 2)), tiles.groups(va.transpose(1, 2))
    dks, colsums, dvs = tiles.groups(dk), tiles.groups(colsum), tiles.groups(dv)
    for i, (qa_t, da_t, dq_t, rowsum_t) in enumerate(views):
        g, start = i // tiles.chunks, tiles.start(i, qa_t)
        shape = (qa_t.shape[0], start[2], lk)
        # z and pw in x, e in the second buffer (eps not folded: d in x, z and pw in the third)
        x, into_e, *rest = (tile_memory(slot, shape, qa) for slot in range(2 if folded else 3))
        blocked_t = tile_blocked(blocked, ctx.heads, start, qa_t)
        distances(qa_t, keys_t[g], blocked_t, x)
        e, pw = weights(x, into_e, rest[0] if rest else x, blocked_t, None if folded else eps)
        near = None
        if exact is not None:
            part = slice(bounds[i], bounds[i + 1])
            near = tile_exact(exact, part, start, lq, (s, da), (blocked, ctx.heads), s2, eps)
        grads = TileGrads(dq_t, rowsum_t, dks[g], colsums[g], dvs[g], i % tiles.chunks == 0, dq, dk, ctx.low)
        backward_tile(qa_t, keys[g], values[g], da_t, e, pw, x[0] if rest else e, grads, near)
    s2_ln2 = LN2 * s2  # ln 2 from d(2^z)/dz
    dq.mul_(s2_ln2).addcmul_(qa.narrow(-1, 0, width), rowsum, value=LN2 / 2)  # the queries' columns: -2 s2 q
    dk.mul_(-LN2 / 2).addcmul_(ka.narrow(-1, 0, width), colsum.unsqueeze_(-1), value=-s2_ln2)
    return dq, dk, dv
