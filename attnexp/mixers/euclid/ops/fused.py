"""Euclid attention as one autograd function with a hand-written backward pass, in torch operations.

The work goes over tiles of query rows, each holding every key of its rows (so a row's softmax is whole). When
one tile holds everything (score matrices of patch and diagnostic models) the forward pass keeps its weights
for the backward pass; otherwise (long sequences) it keeps only q, k, v, the output and the row sums, and the
backward pass recomputes each tile: memory O(tile), as in flash attention.

Per tile, in place where it can: ``x`` from one matmul (scale and norms in it), near rows recomputed exactly (:mod:`~attnexp.mixers.euclid.formula`),
``z = 1/(sqrt(x) + eps)``, ``e = 2^z`` (less each row's largest score where that could overflow) and the row sums
``s``; the output is ``(e @ v) / s``, dividing Lq x D values rather than the Lq x Lk weights. Where eps is below
half an ulp of every distance (the usual case: eps = 1e-9, distances ~1) ``z`` is ``rsqrt(x)``, the same float32
number in one pass. Scores are in base 2 (``exp2`` is about 3x faster than ``exp`` on a CPU): the caller passes
``scale`` and ``eps`` times ln 2, so ``z`` is log2(e) times euclid's score and ``2^z`` its ``exp``. The backward pass
works on ``dout / s`` with the unnormalised ``e``, and takes ``rowsum(p * dp)`` as ``rowsum(dout * out)`` (Lq x D, as
flash attention does).
"""

from __future__ import annotations

import math
import threading
from contextlib import nullcontext
from typing import NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from attnexp.mixers.euclid.formula import near_rows, row_differences

KEEP_SCORES = 256 * 256  # per batch and head: below this many scores one tile holds all and keeps its weights
CPU_TILE_SCORES = 1 << 17  # scores per tile when tiling on a CPU (512 KiB of float32: a core's cache)
GPU_TILE_SCORES = 1 << 24  # on a GPU: few, large tiles
LN2 = math.log(2.0)
EXP_SAFE = 64.0  # 2^z of scores up to this cannot overflow a row's sum; above it each row's largest is taken off
# Rows whose largest (base-2) score may pass 100 (scaled distance below 0.01) can hold one weight of exactly 1 and
# the others exactly 0; there rowsum(p * dp) is taken from the weights, which cancels exactly, not as
# rowsum(dout * out), whose rounding the factor z^2 / d (over 10^4 there) would blow up.
STEEP_X = 1e-4
SCRATCH_LIMIT = 1 << 24  # floats (64 MiB): the backward's scratch is kept between calls up to this size


_scratch = threading.local()


def scratch(like: Tensor) -> Tensor:
    """An uninitialised tensor shaped as ``like`` for a product used only inside one backward call. On a CPU the same
    memory serves every call of the thread: a fresh score-sized block each step costs the process page faults (measured:
    60 a call at 64x64 scores, a sixth of the attention's time), as the allocator hands freed blocks back."""
    if like.device.type != "cpu" or like.numel() > SCRATCH_LIMIT:
        return torch.empty_like(like)
    kept = getattr(_scratch, "buffer", None)
    if kept is None or kept.numel() < like.numel() or kept.dtype != like.dtype:
        kept = _scratch.buffer = like.new_empty(like.numel())
    return kept[: like.numel()].view(like.shape)


class TileForward(NamedTuple):
    """One tile's forward pass: unnormalised weights ``e``, their row sums ``s``, ``pw`` = e * dz/dx * -2 (for the
    backward; None when not asked for), the near rows recomputed exactly and the steep rows (indices into the
    tile, or None)."""

    e: Tensor  # (n, c, Lk)
    s: Tensor  # (n, c, 1)
    pw: Tensor | None
    rows: tuple[Tensor, Tensor] | None
    diffs: Tensor | None  # q_i - k_j of the near rows: (m, Lk, D)
    steep: tuple[Tensor, Tensor] | None


def tiles(groups: int, queries: int, keys: int, device: torch.device) -> list[tuple[slice, slice]]:
    """(group slice, query slice) pairs covering (groups, queries): one tile when a group's scores are few, else
    tiles of about CPU/GPU_TILE_SCORES scores. A tile holds several groups only when it holds all their queries,
    so ``t[g, r]`` of a contiguous (N, Lq, D) tensor is contiguous (a valid ``out=``)."""
    budget = CPU_TILE_SCORES if device.type == "cpu" else GPU_TILE_SCORES
    rows = max(1, min(queries, budget // max(keys, 1)))
    per = max(1, min(groups, budget // (rows * max(keys, 1)))) if rows == queries else 1
    return [(slice(g, min(g + per, groups)), slice(r, min(r + rows, queries)))
            for g in range(0, groups, per) for r in range(0, queries, rows)]


def blocked_tile(blocked: Tensor | None, heads: int, g: slice, r: slice) -> Tensor | None:
    """Rows ``r`` of groups ``g`` (batch * heads + head) of a (B|1, H|1, Lq|1, Lk) mask, broadcastable to the tile's
    (n, c, Lk): a view where the mask broadcasts, else a copy of the tile alone."""
    if blocked is None:
        return None
    b, h, lq, _ = blocked.shape
    rows = blocked[:, :, r] if lq > 1 else blocked  # (b, h, c|1, Lk)
    if b == 1 and h == 1:
        return rows[0]  # (1, c|1, Lk)
    n = torch.arange(g.start, g.stop, device=blocked.device)
    return rows[n // heads if b > 1 else 0, n % heads if h > 1 else 0]  # (n, c|1, Lk)


def forward_tile(q: Tensor, k: Tensor, v: Tensor, q_sq: Tensor, k_sq: Tensor, blocked: Tensor | None,
                 scale: float, eps: float, with_pw: bool, out: Tensor) -> TileForward:
    """Write the tile's output into ``out`` and return what its backward pass needs; ``scale`` and ``eps`` in base 2
    (euclid's times ln 2, see the module's docstring). q (n, c, D), k (n, Lk, D), v (n, Lk, Dv); q_sq (n, c, 1) and
    k_sq (n, 1, Lk) unscaled squared norms; ``blocked`` True where a query may not attend (broadcast to (n, c, Lk));
    out (n, c, Dv)."""
    s2 = scale * scale
    x = torch.add(q_sq, k_sq)  # (n, c, Lk)
    x.baddbmm_(q, k.transpose(1, 2), beta=s2, alpha=-2.0 * s2)  # scale^2 ||q - k||^2 by the expansion
    low = x.amin(-1, keepdim=True)  # (n, c, 1)
    rows, diffs = near_rows(low, q_sq, s2), None
    if rows is not None:
        diffs = row_differences(q, k, rows)  # (m, Lk, D)
        exact = diffs.square().sum(-1).mul_(s2)  # (m, Lk)
        x[rows], low[rows] = exact, exact.amin(-1, keepdim=True)
    lowest = float(low.min())  # NaN spreads through the general branch
    steep = (low < STEEP_X)[..., 0].nonzero(as_tuple=True) if lowest < STEEP_X else None
    if lowest >= max((eps * 2**24) ** 2, EXP_SAFE**-2):  # sqrt(x) + eps rounds to sqrt(x) everywhere
        z, d = x.rsqrt_(), None
        e = torch.exp2(z)
    else:
        d = x.sqrt_()
        z = torch.add(d, eps).reciprocal_()
        if 1.0 / (math.sqrt(max(lowest, 0.0)) + eps) <= EXP_SAFE:
            e = torch.exp2(z)
        else:  # each row's largest allowed score taken off (0 for a row with none)
            top = low.sqrt().add_(eps).reciprocal_() if blocked is None else z.masked_fill(blocked, 0.0).amax(-1, keepdim=True)
            e = torch.sub(z, top).exp2_()
    if blocked is not None:
        e.masked_fill_(blocked, 0.0)
    s = e.sum(-1, keepdim=True)
    if blocked is not None:
        s = torch.where(s > 0, s, 1.0)  # a query with nothing to attend to gives zeros
    torch.bmm(e, v, out=out).div_(s)
    pw = None
    if with_pw:  # e * z^2 / d, 0 where d = 0
        pw = z.pow_(3).mul_(e) if d is None else z.square_().div_(d).nan_to_num_(nan=math.nan, posinf=0.0).mul_(e)
    return TileForward(e, s, pw, rows, diffs, steep)


def backward_tile(q: Tensor, k: Tensor, v: Tensor, tile: TileForward, dout: Tensor, rs: Tensor, scale: float,
                  dq: Tensor | None = None, dk: Tensor | None = None, dv: Tensor | None = None,
                  first: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of one tile: ``dq`` (n, c, D), and ``dk``, ``dv`` (n, Lk, *) written when ``first`` (the group's first
    tile), else added to; into the given tensors, or new ones where None. ``dout`` is the tile's output gradient
    divided by the row sums, ``rs`` = rowsum(dout * out); ``scale`` in base 2, as the forward pass's."""
    s2 = LN2 * scale * scale  # ln 2 from d(2^z)/dz
    e, pw, rows = tile.e, tile.pw, tile.rows
    dv = torch.bmm(e.transpose(1, 2), dout, out=dv) if first else dv.baddbmm_(e.transpose(1, 2), dout)
    g = torch.bmm(dout, v.transpose(1, 2), out=scratch(e))  # dp / s: (n, c, Lk)
    if tile.steep is not None:
        rs = rs.clone()
        rs[tile.steep] = torch.linalg.vecdot(g[tile.steep], e[tile.steep]).unsqueeze_(-1) / tile.s[tile.steep]
    g.sub_(rs).mul_(pw)
    near = None
    if rows is not None:  # near rows: their pairs' (q_i - k_j) from the differences, not from rowsum(g) q - g k
        near = g[rows].unsqueeze(-1) * tile.diffs  # (m, Lk, D)
        g[rows] = 0.0
    dq = torch.mul(q, g.sum(-1, keepdim=True), out=dq).baddbmm_(g, k, beta=-s2, alpha=s2)
    cols = g.sum(1).unsqueeze_(-1)  # (n, Lk, 1)
    if first:
        dk = torch.mul(k, cols, out=dk).baddbmm_(g.transpose(1, 2), q, beta=-s2, alpha=s2)
    else:
        dk.baddbmm_(g.transpose(1, 2), q, alpha=s2).addcmul_(k, cols, value=-s2)
    if near is not None:
        dq[rows] = near.sum(-2).mul_(-s2)
        dk.index_add_(0, rows[0], near, alpha=s2)
    return dq, dk, dv


class FusedEuclid(torch.autograd.Function):
    """softmax(ln 2 / (||q - k|| * scale + eps)) v (base-2 scores: euclid's with ``scale`` and ``eps`` times ln 2) on
    (N, L, D) float32 tensors, N = batch * heads; ``blocked`` a bool
    (B|1, H|1, Lq|1, Lk) view, True where a query may not attend, or None. A query with nothing to attend to gives zeros."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, blocked: Tensor | None, heads: int, scale: float, eps: float) -> Tensor:
        n, lq, lk = len(q), q.shape[1], k.shape[1]
        q_sq, k_sq = torch.linalg.vecdot(q, q).unsqueeze_(-1), torch.linalg.vecdot(k, k).unsqueeze_(-2)
        out = q.new_empty(n, lq, v.shape[-1])
        parts = None if lq * lk < KEEP_SCORES else tiles(n, lq, lk, q.device)  # None: one tile
        keep = parts is None and any(ctx.needs_input_grad[:3])  # the weights kept for the backward pass
        if parts is None:
            whole = slice(0, n), slice(0, lq)
            tile = forward_tile(q, k, v, q_sq, k_sq, blocked_tile(blocked, heads, *whole), scale, eps, keep, out)
            s = tile.s
        else:
            s = q.new_empty(n, lq, 1)
            for g, r in parts:
                tile = forward_tile(q[g, r], k[g], v[g], q_sq[g, r], k_sq[g], blocked_tile(blocked, heads, g, r),
                                    scale, eps, False, out[g, r])
                s[g, r] = tile.s
        if keep:
            ctx.rows, ctx.diffs, ctx.steep = tile.rows, tile.diffs, tile.steep
        ctx.save_for_backward(q, k, v, out, s, q_sq, k_sq, blocked, *((tile.e, tile.pw) if keep else (None, None)))
        ctx.parts, ctx.heads, ctx.scale, ctx.eps, ctx.keep = parts, heads, scale, eps, keep
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout: Tensor):
        q, k, v, out, s, q_sq, k_sq, blocked, e, pw = ctx.saved_tensors
        with torch.autocast(dout.device.type, enabled=False) if torch.is_autocast_enabled(dout.device.type) else nullcontext():
            dout = dout.float() / s  # (N, Lq, Dv); a backward called under autocast stays float32
            rs = torch.linalg.vecdot(dout, out).unsqueeze_(-1)  # rowsum(p * dp)
            if ctx.keep:
                dq, dk, dv = backward_tile(q, k, v, TileForward(e, s, pw, ctx.rows, ctx.diffs, ctx.steep), dout, rs, ctx.scale)
                return dq, dk, dv, None, None, None, None
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            done: set[int] = set()
            for g, r in ctx.parts:
                tile = forward_tile(q[g, r], k[g], v[g], q_sq[g, r], k_sq[g], blocked_tile(blocked, ctx.heads, g, r),
                                    ctx.scale, ctx.eps, True, torch.empty_like(out[g, r]))
                backward_tile(q[g, r], k[g], v[g], tile, dout[g, r], rs[g, r], ctx.scale, dq[g, r], dk[g], dv[g],
                              first=g.start not in done)
                done.add(g.start)
        return dq, dk, dv, None, None, None, None


def fused_euclid_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, eps: float) -> Tensor:
    """Euclid attention for (B, H, L, D) inputs through :class:`FusedEuclid`, in float32.
    ``mask`` broadcasts to (B, H, Lq, Lk), True = may attend.  # (B, H, Lq, Dv)"""
    b, h, lq, _ = q.shape
    if lq == 0 or k.shape[-2] == 0:  # no query, or nothing to attend to: as SDPA
        return v.new_zeros(b, h, lq, v.shape[-1])
    flat = [t.float().reshape(b * h, t.shape[-2], t.shape[-1]).contiguous() for t in (q, k, v)]  # (N, L, D)
    blocked = None if mask is None else ~mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
    with torch.autocast(q.device.type, enabled=False) if torch.is_autocast_enabled(q.device.type) else nullcontext():
        out = FusedEuclid.apply(*flat, blocked, h, scale * LN2, eps * LN2)
    return out.view(b, h, lq, -1).to(v.dtype)
