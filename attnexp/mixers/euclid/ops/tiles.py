"""Tiles of query rows for long sequences: each holds every key of its rows (so a row's softmax is whole)."""

from __future__ import annotations

import torch
from torch import Tensor

KEEP_SCORES = 1 << 20  # scores per call (every batch and head): at most this many, the forward keeps its weights
CPU_TILE_SCORES = 1 << 17  # scores per tile on a CPU (512 KiB of float32: a core's cache)
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


def value_grad(e: Tensor, dout: Tensor, v: Tensor, dv: Tensor | None, first: bool) -> Tensor:
    """``dv`` (n, Lk, Dv) = e^T dout of one tile, written when ``first`` (the group's first tile), else added to; in
    v's precision, as the forward's e @ v."""
    if v.dtype == e.dtype:
        return torch.bmm(e.transpose(1, 2), dout, out=dv) if first else dv.baddbmm_(e.transpose(1, 2), dout)
    part = torch.bmm(e.to(v.dtype).transpose(1, 2), dout.to(v.dtype))
    return part.float() if dv is None else dv.copy_(part) if first else dv.add_(part)


def key_grad(g: Tensor, q: Tensor, k: Tensor, s2: float, dk: Tensor | None, first: bool) -> Tensor:
    """``dk`` (n, Lk, D) of one tile from its score gradient ``g`` (n, c, Lk) (times the distance's derivative):
    s2 (colsum(g) k - g^T q), written when ``first``, else added to."""
    cols = g.sum(1).unsqueeze_(-1)  # (n, Lk, 1)
    if first:
        return torch.mul(k, cols, out=dk).baddbmm_(g.transpose(1, 2), q, beta=-s2, alpha=s2)
    assert dk is not None
    return dk.baddbmm_(g.transpose(1, 2), q, alpha=s2).addcmul_(k, cols, value=-s2)
