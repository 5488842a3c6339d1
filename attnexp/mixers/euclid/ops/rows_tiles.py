"""The tiles of euclid's CPU path: which query rows go together, and one tile's forward pass and backward pass.

A tile is ``per`` whole groups (batch * heads), or a range of one group's query rows, against all of its keys (a row's
softmax is whole). Its squared distances come from one matrix product of the augmented rows (:func:`augmented`), its
scores, weights and their gradient in score-sized buffers of the thread's workspace, few enough to stay in a core's
cache: the forward pass writes each tile's share of the output, the row sums and each row's nearest squared distance;
the backward pass computes the tile's weights again (as flash attention does), or takes those the forward pass kept
(a call small enough to keep them), and adds its share of the gradients. Every tile's rows are contiguous, and the
views of every tile come from one ``split`` of a tensor.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from attnexp.mixers.euclid.formula import FAR
from attnexp.mixers.euclid.ops.exact_rows import TileExact, exact_terms, exact_weights
from attnexp.mixers.euclid.ops.tiles import blocked_tile, value_grad

Buffer = tuple[Tensor, Tensor]  # score-sized memory: its (n, c, Lk) view and the whole-steps flat view over it


class Plan(NamedTuple):
    """How a call's N groups of Lq query rows go into tiles: ``per`` groups a tile with all their rows (``chunks`` =
    1), or ``rows`` of one group's (``chunks`` tiles a group, ``sizes`` each tile's rows, group after group)."""

    per: int
    rows: int
    chunks: int
    count: int
    queries: int
    sizes: list[int]

    def tiles(self, t: Tensor) -> Sequence[Tensor]:
        """Each tile's rows of an (N, Lq, *) tensor whose first two dimensions merge: views."""
        if self.count == 1:
            return (t,)
        if self.chunks == 1:
            return self.groups(t)
        return t.view(1, -1, *t.shape[2:]).split_with_sizes(self.sizes, 1)

    def groups(self, t: Tensor) -> Sequence[Tensor]:
        """Each group chunk of an (N, *) tensor (tile ``i`` takes chunk ``i // chunks``): views."""
        n = t.shape[0]
        if self.per >= n:
            return (t,)
        return t.split_with_sizes([self.per] * (n // self.per) + ([n % self.per] if n % self.per else []))

    def start(self, i: int, tile: Tensor) -> tuple[int, int, int]:
        """The first group, first row and rows of tile ``i`` (``tile`` one of its (n, c, *) views)."""
        return (i // self.chunks) * self.per, (i % self.chunks) * self.rows, tile.shape[1]

    def tile_of(self, at: Tensor) -> Tensor:
        """The tile of each row ``at`` (indices into the N * Lq rows)."""
        group = at.div(self.queries, rounding_mode="floor").div_(self.per, rounding_mode="floor")
        return group.mul_(self.chunks).add_(at.remainder(self.queries).div_(self.rows, rounding_mode="floor"))


def plan(groups: int, queries: int, keys: int, budget: int) -> Plan:
    """Tiles of at most ``budget`` scores: whole groups where one fits, else even ranges of one group's rows (one row
    at least)."""
    rows = max(1, min(queries, budget // max(keys, 1)))
    chunks = math.ceil(queries / rows)
    rows = math.ceil(queries / chunks)
    if chunks == 1:
        per = max(1, min(groups, budget // (rows * max(keys, 1))))
        return Plan(per, rows, 1, math.ceil(groups / per), queries, [])
    sizes = ([rows] * (chunks - 1) + [queries - rows * (chunks - 1)]) * groups
    return Plan(1, rows, chunks, groups * chunks, queries, sizes)


def augmented(q: Tensor, k: Tensor, s2: float, eps2: float) -> tuple[Tensor, Tensor, Tensor]:
    """``[-2 s2 q, s2 ||q||^2 + eps2, 1]`` and ``[k, 1, s2 ||k||^2]``, whose product is ``s2 ||q - k||^2 + eps2`` by the
    expansion (norms and all in one matmul), and ``||q||^2``. The keys keep their bits (the exact rows' differences
    take them), the queries do not (the exact rows keep theirs).  # (N, Lq, D + 2), (N, Lk, D + 2), (N, Lq, 1)"""
    width = q.shape[-1]
    q_sq = torch.linalg.vecdot(q, q).unsqueeze_(-1)
    qa, ka = q.new_empty(*q.shape[:2], width + 2), k.new_empty(*k.shape[:2], width + 2)
    torch.mul(q, -2.0 * s2, out=qa.narrow(-1, 0, width))
    torch.add(eps2, q_sq, alpha=s2, out=qa.narrow(-1, width, 1))
    qa.select(-1, width + 1).fill_(1.0)
    ka.narrow(-1, 0, width).copy_(k)
    ka.select(-1, width).fill_(1.0)
    torch.mul(torch.linalg.vecdot(k, k), s2, out=ka.select(-1, width + 1))
    return qa, ka, q_sq


def with_ones(v: Tensor) -> Tensor:
    """``[v, 1]`` in float32.  # (N, L, Dv + 1)"""
    va = v.new_empty(*v.shape[:2], v.shape[-1] + 1, dtype=torch.float32)
    va.narrow(-1, 0, v.shape[-1]).copy_(v)
    va.select(-1, -1).fill_(1.0)
    return va


def forward_tile(
    qa: Tensor,
    ka_t: Tensor,
    v: Tensor,
    blocked: Tensor | None,
    eps: float | None,
    x: Buffer,
    low: Tensor,
    s: Tensor,
    out: Tensor,
) -> None:
    """One tile's share of the forward pass, into ``low`` (each row's smallest squared distance, blocked keys at FAR),
    ``s`` (row sums of the weights) and ``out`` (weights @ v), working in ``x``. ``eps`` is folded into ``qa`` when
    None.
    qa (n, c, D + 2), ka_t (n, D + 2, Lk), v (n, Lk, Dv), blocked broadcastable to (n, c, Lk) or None."""
    distances(qa, ka_t, blocked, x)
    torch.amin(x[0], -1, keepdim=True, out=low)
    (x[1].rsqrt_() if eps is None else x[1].sqrt_().add_(eps).reciprocal_()).exp2_()
    e = x[0]
    if blocked is not None:
        e.masked_fill_(blocked, 0.0)
    torch.sum(e, -1, keepdim=True, out=s)
    if v.dtype == e.dtype:
        torch.bmm(e, v, out=out)
    else:  # the values' precision under autocast, as dot attention's weighted sum
        out.copy_(torch.bmm(e.to(v.dtype), v))


def distances(qa: Tensor, ka_t: Tensor, blocked: Tensor | None, x: Buffer) -> None:
    """The tile's scaled squared distances ``s2 ||q - k||^2`` (+ eps^2 where folded) into ``x``, blocked keys at FAR."""
    torch.bmm(qa, ka_t, out=x[0])
    if blocked is not None:
        x[0].masked_fill_(blocked, FAR)


def weights(x: Buffer, e: Buffer, pw: Buffer, blocked: Tensor | None, eps: float | None) -> tuple[Tensor, Tensor]:
    """From the squared distances in ``x`` (their memory used up): ``e = 2^z`` into ``e`` (0 at blocked keys) and
    ``e * z^2 / d`` into ``pw`` (z^3 where eps is folded, None), every element through torch's vectorised loop
    (:func:`~attnexp.mixers.euclid.ops.memory.whole_steps`).  # (n, c, Lk) each"""
    if eps is None:  # 1/sqrt(d^2 + eps^2), eps^2 in x
        torch.exp2(x[1].rsqrt_(), out=e[1])
    else:
        torch.exp2(torch.add(x[1].sqrt_(), eps, out=pw[1]).reciprocal_(), out=e[1])
    if blocked is not None:
        e[0].masked_fill_(blocked, 0.0)
    if eps is None:
        torch.pow(x[1], 3, out=pw[1])
    else:
        pw[1].square_().div_(x[1])
    return e[0], pw[0].mul_(e[0])


class TileGrads(NamedTuple):
    """Where one tile's gradients go: its rows of ``dq`` (g k so far) and ``rowsum`` (of g), its groups' ``dk``
    (g^T [-2 s2 q] so far), ``colsum`` (of g) and ``dv``; ``first``: its groups' first tile (written, not added to).
    ``dq_all`` and ``dk_all``: the whole call's (the exact rows' terms go there)."""

    dq: Tensor  # (n, c, D)
    rowsum: Tensor  # (n, c, 1)
    dk: Tensor  # (n, Lk, D)
    colsum: Tensor  # (n, Lk)
    dv: Tensor  # (n, Lk, Dv)
    first: bool
    dq_all: Tensor  # (N, Lq, D)
    dk_all: Tensor  # (N, Lk, D)
    low: torch.dtype  # the values' (dv's products are in it, as the forward's weighted sum)


def backward_tile(
    qa: Tensor,
    k: Tensor,
    va_t: Tensor,
    da: Tensor,
    e: Tensor,
    pw: Tensor,
    t: Tensor,
    grads: TileGrads,
    exact: TileExact | None,
) -> None:
    """One tile's share of the gradients from its weights ``e`` and ``e * z^2 / d`` (``pw``); ``t``: score-sized
    memory to work in (it may be ``e``'s: ``e`` is not read after). qa (n, c, D + 2) and k (n, Lk, D + 2) as
    :func:`augmented` gives them, va_t (n, Dv + 1, Lk) = [v, 1]^T, da (n, c, Dv + 1) = [dout / s, -rowsum(dout' *
    out)]."""
    width, dv_width, lk = qa.shape[-1] - 2, da.shape[-1] - 1, k.shape[1]
    if exact is not None:  # their weights from the differences, their terms of g apart
        keys = k.narrow(-1, 0, width)
        diffs, e_at, pw_at = exact_weights(exact.rows.q, keys, exact.group, exact.stop, exact.s2, exact.eps)
        e.view(-1, lk).index_copy_(0, exact.local, e_at)
        pw.view(-1, lk).index_fill_(0, exact.local, 0.0)
    value_grad(e, da.narrow(-1, 0, dv_width), grads.low, grads.dv, grads.first)
    torch.bmm(da, va_t, out=t)  # dp / s - rowsum(p * dp), (n, c, Lk)
    terms = None
    if exact is not None:
        rows = t.view(-1, lk)
        terms = exact_terms(rows.index_select(0, exact.local), exact.rs, e_at, pw_at, exact.s, diffs)
        rows.index_fill_(0, exact.local, 0.0)
    g = t.mul_(pw)
    torch.sum(g, -1, keepdim=True, out=grads.rowsum)
    torch.bmm(g, k.narrow(-1, 0, width), out=grads.dq)
    if grads.first:
        torch.sum(g, 1, out=grads.colsum)
        torch.bmm(g.transpose(1, 2), qa.narrow(-1, 0, width), out=grads.dk)
    else:
        grads.colsum.add_(g.sum(1))
        grads.dk.baddbmm_(g.transpose(1, 2), qa.narrow(-1, 0, width))
    if exact is not None and terms is not None:  # their rows of dq from the differences alone, and their part of dk
        grads.dq_all.view(-1, width).index_copy_(0, exact.rows.at, terms.sum(1))
        grads.dk_all.index_add_(0, exact.rows.group, terms, alpha=2.0 * exact.s2)


def tile_blocked(blocked: Tensor | None, heads: int, start: tuple[int, int, int], tile: Tensor) -> Tensor | None:
    """A tile's part of the mask, broadcastable to its (n, c, Lk); ``start`` as :meth:`Plan.start` gives it."""
    if blocked is None:
        return None
    group0, row0, rows = start
    return blocked_tile(blocked, heads, slice(group0, group0 + tile.shape[0]), slice(row0, row0 + rows))
