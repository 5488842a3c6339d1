"""The query rows euclid's CPU path computes from the differences ``q - k``: found from each row's nearest key by the
expansion (one host read, free on a CPU), and their weights and gradient terms from the differences, every key of
the row, forward and backward (see :mod:`~attnexp.mixers.euclid.ops.rows` for the rule)."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor


class Exact(NamedTuple):
    """A call's rows computed from the differences."""

    at: Tensor  # (m,): each row's index in the call's N * Lq rows
    group: Tensor  # (m,): its group (batch * heads + head)
    q: Tensor  # (m, D): its query


class TileExact(NamedTuple):
    """The exact rows of one tile: theirs in the call, their places in the tile's n * c rows and their groups in it,
    their row sums and ``rowsum(dout' * out)``, their blocked keys; ``s2`` and ``eps`` the scores' (base 2)."""

    rows: Exact
    local: Tensor  # (m,)
    group: Tensor  # (m,)
    s: Tensor  # (m,)
    rs: Tensor  # (m,)
    stop: Tensor | None  # (m, Lk)
    s2: float
    eps: float


def near_rows(low: Tensor, thr: Tensor) -> Tensor | None:
    """The rows (indices into the N * Lq rows) whose smallest expanded squared distance ``low`` is at most ``thr``, or
    NaN (the expansion can fall below 0 for a key within its rounding, and a row with a NaN input stays NaN on the
    exact path too), or None: one host read, and one more where there are some. Decided per row.  low, thr (N, Lq, 1)
    """
    far = torch.gt(low, thr)
    if far.all():
        return None
    return far.logical_not_().view(-1).nonzero().view(-1)


def blocked_rows(blocked: Tensor | None, heads: int, queries: int, at: Tensor) -> Tensor | None:
    """The rows ``at`` (indices into the N * Lq rows) of a (B|1, H|1, Lq|1, Lk) mask, True where a query may not
    attend.  # (m, Lk)"""
    if blocked is None:
        return None
    b, h, lq, lk = blocked.shape
    n = at.div(queries, rounding_mode="floor")
    rows = blocked[n // heads if b > 1 else 0, n % heads if h > 1 else 0, at % queries if lq > 1 else 0]
    return rows.expand(at.shape[0], lk)


def exact_weights(
    q: Tensor, k: Tensor, group: Tensor, stop: Tensor | None, s2: float, eps: float, with_pw: bool = True
) -> tuple[Tensor, Tensor, Tensor | None]:
    """The rows of queries ``q`` (m, D) against their groups' keys ``k`` (n, Lk, D) from the differences:
    ``k_j - q_i`` (m, Lk, D), ``e`` = 2^(z - the row's largest allowed score) and ``e * z^2 / d`` (0 where d = 0)
    (m, Lk); ``stop``: keys at weight 0 (m, Lk), or None."""
    diffs = k.index_select(0, group).sub_(q.unsqueeze(1))
    d = torch.linalg.vector_norm(diffs, dim=-1).mul_(s2**0.5)  # (m, Lk)
    z = torch.add(d, eps).reciprocal_()
    top = (z if stop is None else z.masked_fill(stop, 0.0)).amax(-1, keepdim=True)  # 0 for a row with none
    e = torch.sub(z, top).exp2_()
    if stop is not None:
        e.masked_fill_(stop, 0.0)
    pw = z.square_().div_(d).nan_to_num_(nan=math.nan, posinf=0.0).mul_(e) if with_pw else None
    return diffs, e, pw


def tile_exact(
    rows: Exact,
    part: slice,
    start: tuple[int, int, int],
    queries: int,
    sums: tuple[Tensor, Tensor],
    blocked: tuple[Tensor | None, int],
    s2: float,
    eps: float,
) -> TileExact | None:
    """The exact rows ``rows[part]`` of a tile whose first group, first row and rows are ``start``; ``sums``: the
    call's row sums and ``da`` (whose last column is -rowsum(dout' * out)); ``blocked``: the mask and the heads."""
    if part.start == part.stop:
        return None
    mine = Exact(*(t[part] for t in rows))
    group0, row0, tile_rows = start
    group, row = mine.at.div(queries, rounding_mode="floor"), mine.at.remainder(queries)
    local = (group - group0).mul_(tile_rows).add_(row - row0)
    s, da = sums
    rs = da.select(-1, -1).reshape(-1).index_select(0, mine.at).neg_()
    stop = blocked_rows(blocked[0], blocked[1], queries, mine.at)
    return TileExact(mine, local, group - group0, s.view(-1).index_select(0, mine.at), rs, stop, s2, eps)


def exact_terms(t: Tensor, rs: Tensor, e: Tensor, pw: Tensor, s: Tensor, diffs: Tensor) -> Tensor:
    """The score gradient's terms g_ij (k_j - q_i) (m, Lk, D) of exact rows, from their ``t`` = dp / s - ``rs`` (m, Lk),
    taken in place: ``rowsum(p * dp)`` comes from their own weights ``e`` and sums ``s`` (where one weight is 1 and
    the factor z^2 / d huge, it cancels exactly), not from dout . out."""
    dp = t.add_(rs.unsqueeze(-1))  # dp / s
    exact_rs = torch.linalg.vecdot(dp, e).div_(s)
    return dp.sub_(exact_rs.unsqueeze_(-1)).mul_(pw).unsqueeze_(-1) * diffs
