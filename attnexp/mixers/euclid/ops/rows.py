"""Euclid on a CPU outside a compiled graph: the query rows that need exact distances found by reading the data.

A CPU has no device to wait for, so reading a value costs nothing and the data can say where work is needed. The
expansion ``||q||^2 + ||k||^2 - 2 q.k`` (one matmul) is exact to a few float32 ulps of the squared norms; a query
row is recomputed whole from the differences ``q - k`` (every key exact, forward and backward) where its nearest key
by the expansion is close enough for that rounding to show:

- a squared distance at most ``ROW_NEAR`` times ``||q||^2`` (scaled): any pair the expansion resolves worse than
  ~1e-5 of its distance lies in such a row (the rule of :func:`~attnexp.mixers.euclid.formula.exact_rows`), or
- a scaled distance below 1/:data:`EXP_SAFE`, where a score could pass 64 (2^64 must not overflow a row's sum) or
  eps is no longer below float32 rounding of the distance.

The rule is applied to the scores (``z`` falls as the distance grows): a row is exact where its largest score is at
least the score of its threshold distance. Its sum of weights is at least its largest weight, so only the rows
whose sum reaches 2^(that score) are looked at (:func:`near_rows`), with no pass over the scores for the others.
Each row is decided on its own numbers, never once for the batch: a row's result is the same bits whatever the other
rows hold, and a NaN stays in its row. Every other row scores its
keys from the expansion in one pass, ``rsqrt(x + eps^2)`` where eps <= :data:`FOLDED_EPS` (equal to 1/(d + eps) to
float32 rounding there, d being at least 1/64), and needs no shift before ``exp2`` (its scores are at most 64).
Exact rows take each row's largest score off before ``exp2`` and ``rowsum(p * dp)`` from their weights (one weight
may be 1 and the factor z^2 / d huge); the others take it as ``rowsum(dout * out)``, Lq x D values, as flash
attention does. Scores are in base 2, as on the fixed-shape path (:mod:`~attnexp.mixers.euclid.ops.fixed`).
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from typing import NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from attnexp.mixers.euclid.formula import FAR, ROW_NEAR, autocast_on, float32_math
from attnexp.mixers.euclid.ops import tiles as tiling
from attnexp.mixers.euclid.ops.memory import kept_memory, workspace
from attnexp.mixers.euclid.ops.tiles import TileForward, backward_tile, blocked_tile, tiles

EXP_SAFE = 64.0  # largest base-2 score a general row may hold: 2^64 times the keys stays far inside float32
FOLDED_EPS = 2**-24 / EXP_SAFE  # up to this eps general rows score 1/sqrt(d^2 + eps^2), 1/(d + eps) to rounding


class Exact(NamedTuple):
    """A tile's rows computed from the differences: where they are, and what their backward pass needs."""

    at: Tensor  # (m,): each row's index in the tile's (n * c) rows
    group: Tensor  # (m,): its group (batch * heads + head)
    diffs: Tensor  # (m, Lk, D) k_j - q_i

    def split(self, g: Tensor, tile: TileForward, rs: Tensor) -> Tensor:
        """The exact rows' g (k_j - q_i) (m, Lk, D), their rowsum(p * dp) taken from the weights (where one weight
        is 1 it cancels exactly); zeros in ``g``."""
        assert tile.pw is not None
        lk = g.shape[-1]
        rows = g.view(-1, lk)
        dp = rows.index_select(0, self.at).add_(rs.view(-1, 1).index_select(0, self.at))  # (m, Lk)
        weights = tile.e.view(-1, lk).index_select(0, self.at)
        exact_rs = torch.linalg.vecdot(dp, weights).div_(tile.s.view(-1).index_select(0, self.at))
        dp.sub_(exact_rs.unsqueeze_(-1)).mul_(tile.pw.view(-1, lk).index_select(0, self.at))
        rows.index_fill_(0, self.at, 0.0)
        return dp.unsqueeze_(-1) * self.diffs

    def join(self, terms: Tensor, q: Tensor, k: Tensor, dq: Tensor, dk: Tensor, s2: float) -> None:
        """Their rows of ``dq`` from the differences alone (not from rowsum(g) q - g k), their part of ``dk``."""
        dq.view(-1, dq.shape[-1]).index_copy_(0, self.at, terms.sum(1).mul_(s2))
        dk.index_add_(0, self.group, terms, alpha=-s2)


def general_floor(eps: float, folded: bool) -> float:
    """Squared scaled distance (with eps^2 where folded) below which a row is computed exactly."""
    return EXP_SAFE**-2 + (eps * eps if folded else 0.0)


def near_rows(z: Tensor, s: Tensor, z_thr: Tensor) -> Tensor | None:
    """The rows (indices into the tile's n * c rows) holding a score at or above their ``z_thr``, or a NaN, or None.
    A row's sum ``s`` is at least its largest weight, so only rows whose sum is not below 2^z_thr are looked at (their
    largest scores gathered where they are few, else the largest of every row): one host read, and a few more where
    there are some. A NaN counts as near: the expansion can fall below 0 for a key within its rounding (the square
    root then gives NaN), and a row with a NaN input stays NaN on the exact path too. Blocked keys score ~1e-15.
    z (n, c, Lk), s and z_thr (n, c, 1)"""
    maybe = s.view(-1).lt(z_thr.view(-1).exp2()).logical_not_()
    if not maybe.any():
        return None
    rows = maybe.nonzero().view(-1)
    z2 = z.view(-1, z.shape[-1])
    largest = z2.index_select(0, rows).amax(-1) if 4 * len(rows) <= len(maybe) else z2.amax(-1).index_select(0, rows)
    near = rows[(largest < z_thr.view(-1).index_select(0, rows)).logical_not_()]
    return near if len(near) else None


def exact_forward(
    q: Tensor, k: Tensor, at: Tensor, blocked: Tensor | None, s2: float, eps: float
) -> tuple[Exact, Tensor, Tensor]:
    """The rows ``at`` from the differences: (their :class:`Exact`, e = 2^(z - the row's largest allowed score),
    e * z^2 / d with 0 where d = 0), blocked keys at weight 0.  # (m, Lk), (m, Lk)"""
    group = at.div(q.shape[1], rounding_mode="floor")
    diffs = k.index_select(0, group).sub_(q.view(-1, q.shape[-1]).index_select(0, at).unsqueeze_(1))  # (m, Lk, D)
    d = torch.linalg.vector_norm(diffs, dim=-1).mul_(s2**0.5)  # (m, Lk)
    z = torch.add(d, eps).reciprocal_()
    stop = None if blocked is None else blocked.expand(q.shape[0], q.shape[1], -1).reshape(-1, k.shape[1])[at]
    top = (z if stop is None else z.masked_fill(stop, 0.0)).amax(-1, keepdim=True)  # 0 for a row with none
    e = torch.sub(z, top).exp2_()
    if stop is not None:
        e.masked_fill_(stop, 0.0)
    pw = z.square_().div_(d).nan_to_num_(nan=math.nan, posinf=0.0).mul_(e)
    return Exact(at, group, diffs), e, pw


def forward_tile(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    blocked: Tensor | None,
    scale: float,
    eps: float,
    kept: list[Tensor | None] | None,
    with_pw: bool,
) -> TileForward:
    """The tile's output and what its backward pass needs; ``scale`` and ``eps`` in base 2 (euclid's times ln 2).
    q (n, c, D), k (n, Lk, D), v (n, Lk, Dv); ``blocked`` True where a query may not attend (broadcast to
    (n, c, Lk)); ``kept``: memory for ``e`` and ``pw`` kept for the backward pass (None: the thread's workspace)."""
    shape = (q.shape[0], q.shape[1], k.shape[1])
    into_e, into_pw = kept if kept is not None else (workspace(2, shape, q), workspace(1, shape, q))
    s2, folded = scale * scale, eps <= FOLDED_EPS
    q_sq = torch.linalg.vecdot(q, q).unsqueeze_(-1)  # (n, c, 1), unscaled
    k_sq = torch.linalg.vecdot(k, k)
    if folded:
        k_sq.add_(eps * eps / s2)
    x = torch.add(q_sq, k_sq.unsqueeze_(-2), out=into_pw if folded else workspace(0, shape, q))
    x.baddbmm_(q, k.transpose(1, 2), beta=s2, alpha=-2.0 * s2)  # s2 ||q - k||^2 (+ eps^2), (n, c, Lk)
    if blocked is not None:
        x.masked_fill_(blocked, FAR)
    thr = q_sq.mul_(s2 * ROW_NEAR).clamp_min_(general_floor(eps, folded))  # (n, c, 1): exact at or below
    if folded:
        z, d = x.rsqrt_(), None
        z_thr = thr.rsqrt()
    else:
        d = x.sqrt_()
        z = torch.add(d, eps, out=into_pw).reciprocal_()
        z_thr = thr.sqrt().add_(eps).reciprocal_()
    e = torch.exp2(z, out=into_e)
    if blocked is not None:
        e.masked_fill_(blocked, 0.0)
    s = e.sum(-1, keepdim=True)
    exact = None
    at = near_rows(z, s, z_thr)
    if at is not None:
        exact, e_at, pw_at = exact_forward(q, k, at, blocked, s2, eps)
        e.view(-1, shape[-1]).index_copy_(0, at, e_at)
        s.view(-1, 1).index_copy_(0, at, e_at.sum(-1, keepdim=True))
    if blocked is not None:
        s = torch.where(s > 0, s, 1.0)  # a query with nothing to attend to gives zeros
    out = torch.bmm(e, v) if v.dtype == e.dtype else torch.bmm(e.to(v.dtype), v).float()
    out.div_(s)
    pw = None
    if with_pw:
        # z^3 = z^2 / d where z = 1/sqrt(d^2 + eps^2), to rounding in general rows
        pw = z.pow_(3).mul_(e) if d is None else z.square_().div_(d).mul_(e)
        if exact is not None:
            pw.view(-1, shape[-1]).index_copy_(0, at, pw_at)
    return TileForward(out, e, s, pw, exact)


class RowsEuclid(torch.autograd.Function):
    """softmax(ln 2 / (||q - k|| * scale + eps)) v (base-2 scores: euclid's with ``scale`` and ``eps`` times ln 2) on
    (N, L, D) float32 CPU tensors, N = batch * heads, its exact rows found by reading the data; ``blocked`` a bool
    (B|1, H|1, Lq|1, Lk) view, True where a query may not attend, or None. A query with nothing to attend to gives
    zeros. Eager only: a compiled graph runs :class:`~attnexp.mixers.euclid.ops.fixed.FixedEuclid`."""

    @staticmethod
    def forward(
        ctx, q: Tensor, k: Tensor, v: Tensor, blocked: Tensor | None, heads: int, scale: float, eps: float
    ) -> Tensor:
        n, lq, lk = len(q), q.shape[1], k.shape[1]
        ctx.empty = lq == 0 or lk == 0
        if ctx.empty:  # no query, or nothing to attend to: zeros, as SDPA gives (and zero gradients)
            ctx.save_for_backward(q, k, v)
            return q.new_zeros(n, lq, v.shape[-1])
        ctx.heads, ctx.scale, ctx.eps = heads, scale, eps
        if n * lq * lk <= tiling.KEEP_SCORES:  # one tile, its weights kept for the backward pass
            grads = any(ctx.needs_input_grad[:3])
            kept = kept_memory(ctx, q, (n, lq, lk), (n, lq, lk)) if grads else None
            tile = forward_tile(
                q, k, v, blocked_tile(blocked, heads, slice(0, n), slice(0, lq)), scale, eps, kept, grads
            )
            ctx.parts, ctx.exact = None, tile.near
            ctx.save_for_backward(q, k, v, tile.out, tile.s, blocked, tile.e, tile.pw)
            return tile.out
        ctx.parts = tiles(n, lq, lk, q.device)
        out, s = q.new_empty(n, lq, v.shape[-1]), q.new_empty(n, lq, 1)
        for g, r in ctx.parts:
            tile = forward_tile(q[g, r], k[g], v[g], blocked_tile(blocked, heads, g, r), scale, eps, None, False)
            out[g, r], s[g, r] = tile.out, tile.s
        ctx.save_for_backward(q, k, v, out, s, blocked, None, None)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout: Tensor):
        if ctx.empty:
            return *(torch.zeros_like(t) for t in ctx.saved_tensors[:3]), None, None, None, None
        q, k, v, out, s, blocked, e, pw = ctx.saved_tensors
        with float32_math("cpu") if autocast_on("cpu") else nullcontext():  # eager: autocast is on or it is not
            dout = torch.div(dout.float(), s, out=workspace(6, dout.shape, q))  # (N, Lq, Dv) / row sums
            rs = torch.linalg.vecdot(dout, out).unsqueeze_(-1)  # rowsum(p * dp) / s
            if ctx.parts is None:
                dq, dk, dv = backward_tile(q, k, v, TileForward(out, e, s, pw, ctx.exact), dout, ctx.scale, rs)
                return dq, dk, dv if dv.dtype == v.dtype else dv.to(v.dtype), None, None, None, None
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v, dtype=torch.float32)
            done: set[int] = set()
            for g, r in ctx.parts:
                tile = forward_tile(
                    q[g, r], k[g], v[g], blocked_tile(blocked, ctx.heads, g, r), ctx.scale, ctx.eps, None, True
                )
                backward_tile(
                    q[g, r],
                    k[g],
                    v[g],
                    tile,
                    dout[g, r],
                    ctx.scale,
                    rs[g, r],
                    dq[g, r],
                    dk[g],
                    dv[g],
                    first=g.start not in done,
                )
                done.add(g.start)
        return dq, dk, dv if dv.dtype == v.dtype else dv.to(v.dtype), None, None, None, None
