"""Tiles of query rows for long sequences: each holds every key of its rows (so a row's softmax is whole); a tile's
forward pass as both CPU paths keep it, and its backward pass, written once."""

from __future__ import annotations

import math
from typing import NamedTuple, Protocol

import torch
from torch import Tensor

from attnexp.mixers.euclid.ops.memory import core_cache_bytes, workspace

LN2 = math.log(2.0)

KEEP_SCORES = 1 << 20  # scores per call (every batch and head): at most this many, the forward keeps its weights
# scores per tile on a CPU: a tile's two float32 buffers take half a core's cache (2 MiB: 131,072 scores), within
# 65,536 and 262,144 (fewer cost more in Python per tile than they save)
CPU_TILE_SCORES = min(max(core_cache_bytes() // 16, 1 << 16), 1 << 18)
GPU_TILE_SCORES = 1 << 24  # on a GPU: few, large tiles


def tiles(groups: int, queries: int, keys: int, device: torch.device) -> list[tuple[slice, slice]]:
    """(group slice, query slice) pairs covering (groups, queries): tiles of about CPU/GPU_TILE_SCORES scores. A tile
    holds several groups only when it holds all their queries, so ``t[g, r]`` of a contiguous (N, Lq, D) tensor is
    contiguous (a valid ``out=``)."""
    budget = CPU_TILE_SCORES if device.type == "cpu" else GPU_TILE_SCORES
    rows = max(1, min(queries, budget // max(keys, 1)))
    per = max(1, min(groups, budget // (rows * max(keys, 1)))) if rows == queries else 1
    return [
        (slice(g, min(g + per, groups)), slice(r, min(r + rows, queries)))
        for g in range(0, groups, per)
        for r in range(0, queries, rows)
    ]


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


def value_grad(e: Tensor, dout: Tensor, low: torch.dtype, dv: Tensor | None, first: bool) -> Tensor:
    """``dv`` (n, Lk, Dv) = e^T dout of one tile, written when ``first`` (the group's first tile), else added to; in
    the values' precision ``low``, as the forward's e @ v."""
    if low == e.dtype:
        return torch.bmm(e.transpose(1, 2), dout, out=dv) if first else dv.baddbmm_(e.transpose(1, 2), dout)
    part = torch.bmm(e.to(low).transpose(1, 2), dout.to(low))
    return part.float() if dv is None else dv.copy_(part) if first else dv.add_(part)


def key_grad(g: Tensor, q: Tensor, k: Tensor, s2: float, dk: Tensor | None, first: bool) -> Tensor:
    """``dk`` (n, Lk, D) of one tile from its score gradient ``g`` (n, c, Lk) (times the distance's derivative):
    s2 (colsum(g) k - g^T q), written when ``first``, else added to."""
    cols = g.sum(1).unsqueeze_(-1)  # (n, Lk, 1)
    if first:
        return torch.mul(k, cols, out=dk).baddbmm_(g.transpose(1, 2), q, beta=-s2, alpha=s2)
    assert dk is not None
    return dk.baddbmm_(g.transpose(1, 2), q, alpha=s2).addcmul_(k, cols, value=-s2)


class NearKeys(Protocol):
    """The scores of a tile whose gradients come from the differences ``k_j - q_i`` rather than from the expansion
    (where it loses the distance to rounding): each row's nearest keys on the fixed-shape path, every key of the rows
    that need it on the rows path."""

    def split(self, g: Tensor, tile: TileForward, rs: Tensor) -> Tensor:
        """Their terms of the score gradient, from ``g`` = dp / s - ``rs`` before the factor ``pw``, taken out of
        ``g`` (zeros left there)."""
        ...

    def join(self, terms: Tensor, q: Tensor, k: Tensor, dq: Tensor, dk: Tensor, s2: float) -> None:
        """Their part of the gradients, put into ``dq`` and ``dk``."""
        ...


class TileForward(NamedTuple):
    """One tile's forward pass: its output, unnormalised weights ``e``, their row sums ``s``, ``pw`` = e * z^2 / d (for
    the backward; None when not asked for) and the scores whose gradients come from differences (None: none)."""

    out: Tensor  # (n, c, Dv)
    e: Tensor  # (n, c, Lk)
    s: Tensor  # (n, c, 1)
    pw: Tensor | None
    near: NearKeys | None


def backward_tile(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    tile: TileForward,
    dout: Tensor,
    scale: float,
    rs: Tensor | None = None,
    dq: Tensor | None = None,
    dk: Tensor | None = None,
    dv: Tensor | None = None,
    first: bool = True,
) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of one tile: ``dq`` (n, c, D), and ``dk``, ``dv`` (n, Lk, *) written when ``first`` (the group's first
    tile), else added to; into the given tensors, or new ones where None. ``dout`` is the tile's output gradient
    divided by the row sums; ``scale`` in base 2, as the forward pass's. ``rs``: rowsum(dout * out) (n, c, 1), as
    flash attention takes it, or None to take rowsum(p * dp) from the weights (exact where one weight is 1 and the
    factor z^2 / d is huge)."""
    s2 = LN2 * scale * scale  # ln 2 from d(2^z)/dz
    e, pw = tile.e, tile.pw
    assert pw is not None
    dv = value_grad(e, dout, v.dtype, dv, first)
    if rs is not None and v.dtype == e.dtype:
        g = torch.baddbmm(rs.neg(), dout, v.transpose(1, 2), out=workspace(3, e.shape, e))  # dp / s - rowsum
    else:  # dp / s in float32 (the factor z^2 / d magnifies its rounding)
        g = torch.bmm(dout, (v if v.dtype == e.dtype else v.float()).transpose(1, 2), out=workspace(3, e.shape, e))
        if rs is None:
            rs = torch.mul(g, e, out=workspace(0, e.shape, e)).sum(-1, keepdim=True).div_(tile.s)
        g.sub_(rs)
    terms = None if tile.near is None else tile.near.split(g, tile, rs)
    g.mul_(pw)
    dq = torch.mul(q, g.sum(-1, keepdim=True), out=dq).baddbmm_(g, k, beta=-s2, alpha=s2)
    dk = key_grad(g, q, k, s2, dk, first)
    if tile.near is not None and terms is not None:
        tile.near.join(terms, q, k, dq, dk, s2)
    return dq, dk, dv
