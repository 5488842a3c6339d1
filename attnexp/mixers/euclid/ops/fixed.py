"""Euclid attention as one autograd function with a hand-written backward pass, in torch operations, without a host
read or a data-dependent shape: what runs in a compiled graph on a CPU and on a GPU without Triton (a CPU outside a
compiled graph runs :mod:`~attnexp.mixers.euclid.ops.rows`, a GPU with Triton :mod:`~attnexp.mixers.euclid.ops.kernel`).

When a call's scores are few (at most ``tiles.KEEP_SCORES``, a million: patch, ViT and diagnostic models) the
forward pass keeps its weights for the backward pass; otherwise it keeps q, k, v, the output, the row sums and the
nearest keys, and the work goes over tiles of query rows (:mod:`~attnexp.mixers.euclid.ops.tiles`), the backward
pass recomputing each tile's weights: memory O(tile), as in flash attention. On a CPU no score-sized value gets
fresh memory (:mod:`~attnexp.mixers.euclid.ops.memory`).

Per tile, in place: ``x`` from one matmul (:func:`~attnexp.mixers.euclid.formula.expansion`), the nearest keys and
their exact distances (:func:`nearest`), ``z = 1/(sqrt(x) + eps)``, ``e = 2^(z - top)`` with ``top`` the row's
largest score (its nearest key's: no other key's is larger, see :mod:`~attnexp.mixers.euclid.formula`) and the row
sums ``s``; the output is ``(e @ v) / s``, dividing Lq x D values rather than the Lq x Lk weights. Scores are in base
2 (``exp2`` is about 3x faster than ``exp`` on a CPU): the caller passes ``scale`` and ``eps`` times ln 2, so ``z`` is
log2(e) times euclid's score and ``2^z`` its ``exp``. The backward pass works on ``dout / s`` with the unnormalised
``e``, and takes ``rowsum(p * dp)`` from the weights: exact where one weight is 1 and the factor ``z^2 / d`` is huge.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from attnexp.mixers.euclid.formula import (
    FAR,
    NEAREST,
    expansion,
    float32_math,
    key_rows,
    nearest_differences,
    nearest_keys,
)
from attnexp.mixers.euclid.ops import tiles as tiling
from attnexp.mixers.euclid.ops.memory import kept_memory, workspace
from attnexp.mixers.euclid.ops.tiles import TileForward, backward_tile, blocked_tile, tiles

FOLDED_EPS = 1e-8  # at most this eps, a key beyond the nearest scores 1/sqrt(d^2 + eps^2) (see forward_tile)


class Nearest(NamedTuple):
    """Each query's nearest keys with their exact distances, found once in the forward pass."""

    idx: Tensor  # (n, c, K) the keys
    rows: Tensor  # (n, c, K) their rows in k.view(-1, D)
    d: Tensor  # (n, c, K) their scaled distances, from the differences
    floor: Tensor  # (n, c, 1) no other key's squared distance is taken below this (the farthest of them)
    top: Tensor  # (n, c, 1) the row's largest score (the nearest's)
    diffs: Tensor | None  # (n, c, K, D) k_j - q_i, when kept for the backward pass

    def split(self, g: Tensor, tile: TileForward, rs: Tensor) -> Tensor:
        """The nearest keys' terms (n, c, K), times pw; zeros in ``g``."""
        assert tile.pw is not None
        terms = g.gather(-1, self.idx).mul_(tile.pw.gather(-1, self.idx))
        g.scatter_(-1, self.idx, 0.0)
        return terms

    def join(self, terms: Tensor, q: Tensor, k: Tensor, dq: Tensor, dk: Tensor, s2: float) -> None:
        """g_ij (k_j - q_i) from the differences, both sides."""
        rows = self.rows.view(-1)
        diffs = self.diffs
        if diffs is None:
            diffs = nearest_differences(q, k, self.idx, workspace(4, (rows.numel(), q.shape[-1]), q), rows)
        pairs = torch.mul(diffs, terms.unsqueeze_(-1), out=workspace(4, diffs.shape, q))  # g_ij (k_j - q_i)
        dk.view(-1, dk.shape[-1]).index_add_(0, rows, pairs.view(-1, pairs.shape[-1]), alpha=-s2)
        dq.add_(torch.sum(pairs, 2, out=workspace(5, q.shape, q)), alpha=s2)


def nearest(
    q: Tensor,
    k: Tensor,
    x: Tensor,
    allowed_at: Tensor | None,
    scale: float,
    eps: float,
    folded: bool,
    diffs_into: Tensor | None,
) -> Nearest:
    """The :data:`NEAREST` nearest keys of each query by the expansion ``x`` (blocked keys at FAR), and their exact
    distances from the differences. ``allowed_at``: a (n|1, c|1, Lk) bool mask of keys that may be attended, or None;
    ``folded``: ``x`` holds eps^2 as well (the floor then too); ``diffs_into``: memory for the differences to keep for
    the backward pass, or None (the thread's workspace, not kept)."""
    idx = nearest_keys(x, min(NEAREST, k.shape[1]), workspace(1, x.shape, x, torch.int32))
    rows = key_rows(idx, k.shape[1])
    diffs = nearest_differences(
        q, k, idx, workspace(4, (idx.numel(), q.shape[-1]), q) if diffs_into is None else diffs_into, rows
    )
    d = torch.linalg.vector_norm(diffs, dim=-1).mul_(scale)  # (n, c, K)
    if allowed_at is None:
        closest, farthest = torch.aminmax(d, dim=-1, keepdim=True)
    else:  # a blocked key (picked in a row with fewer allowed keys than K) sets no bound
        allowed = allowed_at.expand(x.shape).gather(-1, idx)
        farthest = (d * allowed).amax(-1, keepdim=True)
        closest = d.masked_fill(~allowed, math.inf).amin(-1, keepdim=True)
    floor = farthest.add_(eps).square_() if folded else farthest.square_()
    return Nearest(
        idx, rows.view(idx.shape), d, floor, closest.add_(eps).reciprocal_(), None if diffs_into is None else diffs
    )


def tile_nearest(near: Nearest, g: slice, r: slice, keys: int) -> Nearest:
    """The part of a whole call's nearest keys a tile (groups ``g``, query rows ``r``) holds, rows into its keys."""
    idx = near.idx[g, r]
    return Nearest(idx, key_rows(idx, keys).view(idx.shape), near.d[g, r], near.floor[g, r], near.top[g, r], None)


def forward_tile(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    blocked: Tensor | None,
    scale: float,
    eps: float,
    kept: tuple[Tensor | None, Tensor | None] | None,
    with_pw: bool,
    near: Nearest | None = None,
) -> TileForward:
    """The tile's output (n, c, Dv) and what its backward pass needs; ``scale`` and ``eps`` in base 2 (euclid's times
    ln 2, see the module's docstring). q (n, c, D), k (n, Lk, D), v (n, Lk, Dv); ``blocked`` True where a query may not
    attend (broadcast to (n, c, Lk)). ``kept``: memory for ``e`` and ``pw`` kept for the backward pass (None: new),
    or None: both in the thread's workspace; ``near``: the nearest keys, when known."""
    shape = (q.shape[0], q.shape[1], k.shape[1])
    into_e, into_pw, into_diffs = kept if kept is not None else (workspace(2, shape, q), workspace(1, shape, q), None)
    folded = eps <= FOLDED_EPS
    x = expansion(q, k, scale * scale, out=workspace(0, shape, q), plus=eps * eps if folded else 0.0)
    if blocked is not None:
        x.masked_fill_(blocked, FAR)
    if near is None:
        near = nearest(q, k, x, None if blocked is None else ~blocked, scale, eps, folded, into_diffs)
    z_near = near.d.add(eps).reciprocal_()  # (n, c, K)
    if folded:  # 1/sqrt(d^2 + eps^2) for the keys beyond the nearest: their 1/(d + eps) to float32 rounding wherever
        # the expansion resolves d (eps=1e-9: everywhere past d ~ 1e-7 of the norms), in one pass
        z = x.clamp_min_(near.floor).rsqrt_()
        d = None
    else:
        d = x.clamp_min_(near.floor).sqrt_().scatter_(-1, near.idx, near.d)
        z = torch.add(d, eps, out=into_pw).reciprocal_()
    z.scatter_(-1, near.idx, z_near)
    e = torch.sub(z, near.top, out=into_e).exp2_()
    if blocked is not None:
        e.masked_fill_(blocked, 0.0)
    s = e.sum(-1, keepdim=True)
    if blocked is not None:
        s = torch.where(s > 0, s, 1.0)  # a query with nothing to attend to gives zeros
    out = torch.bmm(e, v) if v.dtype == e.dtype else torch.bmm(e.to(v.dtype), v).float()  # v's precision: see below
    out.div_(s)
    pw = None
    if (
        with_pw
    ):  # e * z^2 / d, 0 where d = 0: z^3 where the score is 1/sqrt(d^2 + eps^2) (eps^2 < 1e-16: below rounding)
        if folded:
            pw = torch.pow(z, 3, out=into_pw).mul_(e)
            w_near = z_near.square().div_(near.d).nan_to_num_(nan=math.nan, posinf=0.0)
            pw.scatter_(-1, near.idx, w_near.mul_(e.gather(-1, near.idx)))
        else:
            pw = z.square_().div_(d).nan_to_num_(nan=math.nan, posinf=0.0).mul_(e)
    return TileForward(out, e, s, pw, near)


class FixedEuclid(torch.autograd.Function):
    """softmax(ln 2 / (||q - k|| * scale + eps)) v (base-2 scores: euclid's with ``scale`` and ``eps`` times ln 2) on
    (N, L, D) float32 tensors, N = batch * heads; ``blocked`` a bool (B|1, H|1, Lq|1, Lk) view, True where a query may
    not attend, or None. A query with nothing to attend to gives zeros."""

    @staticmethod
    def forward(
        ctx, q: Tensor, k: Tensor, v: Tensor, blocked: Tensor | None, heads: int, scale: float, eps: float
    ) -> Tensor:
        n, lq, lk = len(q), q.shape[1], k.shape[1]
        ctx.empty = lq == 0 or lk == 0
        if ctx.empty:  # no query, or nothing to attend to: zeros, as SDPA gives (and zero gradients)
            ctx.save_for_backward(q, k, v)
            return q.new_zeros(n, lq, v.shape[-1])
        keep = n * lq * lk <= tiling.KEEP_SCORES
        if keep:
            grads = any(ctx.needs_input_grad[:3])
            kept = (
                kept_memory(ctx, q, (n, lq, lk), (n, lq, lk), (n * lq * min(NEAREST, lk), q.shape[-1]))
                if grads
                else None
            )
            tile = forward_tile(
                q, k, v, blocked_tile(blocked, heads, slice(0, n), slice(0, lq)), scale, eps, kept, grads
            )
            out, s, near, parts = tile.out, tile.s, tile.near, None
        else:
            parts = tiles(n, lq, lk, q.device)
            out, s, near = q.new_empty(n, lq, v.shape[-1]), q.new_empty(n, lq, 1), None
            for g, r in parts:
                tile = forward_tile(q[g, r], k[g], v[g], blocked_tile(blocked, heads, g, r), scale, eps, None, False)
                near = near or Nearest(*(t.new_empty(n, lq, *t.shape[2:]) for t in tile.near[:-1]), None)
                for whole, part in zip((out, s, *near[:-1]), (tile.out, tile.s, *tile.near[:-1])):
                    whole[g, r] = part
        ctx.save_for_backward(q, k, v, out, s, blocked, *near, *((tile.e, tile.pw) if keep else (None, None)))
        ctx.parts, ctx.heads, ctx.scale, ctx.eps = parts, heads, scale, eps
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout: Tensor):
        if ctx.empty:
            return *(torch.zeros_like(t) for t in ctx.saved_tensors[:3]), None, None, None, None
        q, k, v, out, s, blocked, *saved = ctx.saved_tensors
        near, (e, pw) = Nearest(*saved[:6]), saved[6:]
        with float32_math(dout.device.type):
            dout = torch.div(
                as_float(dout), s, out=workspace(6, dout.shape, dout)
            )  # (N, Lq, Dv); float32 under autocast
            if ctx.parts is None:
                dq, dk, dv = backward_tile(q, k, v, TileForward(out, e, s, pw, near), dout, ctx.scale)
                return dq, dk, like(dv, v), None, None, None, None
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v, dtype=torch.float32)
            done: set[int] = set()
            for g, r in ctx.parts:
                tile = forward_tile(
                    q[g, r],
                    k[g],
                    v[g],
                    blocked_tile(blocked, ctx.heads, g, r),
                    ctx.scale,
                    ctx.eps,
                    None,
                    True,
                    tile_nearest(near, g, r, k.shape[1]),
                )
                backward_tile(
                    q[g, r], k[g], v[g], tile, dout[g, r], ctx.scale, None, dq[g, r], dk[g], dv[g], g.start not in done
                )
                done.add(g.start)
        return dq, dk, like(dv, v), None, None, None, None


def as_float(t: Tensor) -> Tensor:
    """``t`` in float32 (itself, without an operation, when it is)."""
    return t if t.dtype == torch.float32 else t.float()


def like(t: Tensor, other: Tensor) -> Tensor:
    """``t`` in ``other``'s dtype (itself, without an operation, when it is)."""
    return t if t.dtype == other.dtype else t.to(other.dtype)
