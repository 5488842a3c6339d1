"""Euclid's CPU path for a call whose weights fit beside its inputs: one tile, its weights ``e`` and ``e * z^2 / d``
kept from the forward pass for the backward pass (:func:`~attnexp.mixers.euclid.ops.tiles.backward_tile`), no
score computed twice. Its exact rows are found from the row sums (a row's sum is at least its largest weight, so only
rows whose sum reaches the threshold's weight are looked at), the rule of :mod:`~attnexp.mixers.euclid.ops.rows`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from attnexp.mixers.euclid.formula import FAR, ROW_NEAR
from attnexp.mixers.euclid.ops.exact_rows import exact_terms, exact_weights
from attnexp.mixers.euclid.ops.memory import workspace
from attnexp.mixers.euclid.ops.tiles import TileForward


class KeptExact(NamedTuple):
    """The exact rows of a kept call: where they are, and what their backward pass needs."""

    at: Tensor  # (m,): each row's index in the call's N * Lq rows
    group: Tensor  # (m,): its group (batch * heads + head)
    diffs: Tensor  # (m, Lk, D) k_j - q_i

    def split(self, g: Tensor, tile: TileForward, rs: Tensor) -> Tensor:
        """The exact rows' g (k_j - q_i) (m, Lk, D), their rowsum(p * dp) taken from the weights (where one weight
        is 1 it cancels exactly); zeros in ``g``."""
        assert tile.pw is not None
        lk = g.shape[-1]
        rows = g.view(-1, lk)
        e, pw = (t.view(-1, lk).index_select(0, self.at) for t in (tile.e, tile.pw))
        t, rs, s = rows.index_select(0, self.at), rs.view(-1).index_select(0, self.at), tile.s.view(-1)[self.at]
        terms = exact_terms(t, rs, e, pw, s, self.diffs)
        rows.index_fill_(0, self.at, 0.0)
        return terms

    def join(self, terms: Tensor, q: Tensor, k: Tensor, dq: Tensor, dk: Tensor, s2: float) -> None:
        """Their rows of ``dq`` from the differences alone (not from rowsum(g) q - g k), their part of ``dk``."""
        dq.view(-1, dq.shape[-1]).index_copy_(0, self.at, terms.sum(1).mul_(s2))
        dk.index_add_(0, self.group, terms, alpha=-s2)


def kept_near_rows(z: Tensor, s: Tensor, z_thr: Tensor) -> Tensor | None:
    """The rows (indices into the n * c rows) holding a score at or above their ``z_thr``, or a NaN, or None. A row's
    sum ``s`` is at least its largest weight, so only rows whose sum is not below 2^z_thr are looked at (their
    largest scores gathered where they are few, else the largest of every row): one host read, and a few more where
    there are some. A NaN counts as near (see :func:`~attnexp.mixers.euclid.ops.exact_rows.near_rows`).
    z (n, c, Lk), s and z_thr (n, c, 1)"""
    maybe = s.view(-1).lt(z_thr.view(-1).exp2()).logical_not_()
    if not maybe.any():
        return None
    rows = maybe.nonzero().view(-1)
    z2 = z.view(-1, z.shape[-1])
    few = 4 * rows.shape[0] <= maybe.shape[0]
    largest = z2.index_select(0, rows).amax(-1) if few else z2.amax(-1).index_select(0, rows)
    near = rows[(largest < z_thr.view(-1).index_select(0, rows)).logical_not_()]
    return near if near.shape[0] else None


def kept_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    blocked: Tensor | None,
    scale: float,
    eps: float,
    rule: tuple[bool, float],
    kept: list[Tensor | None] | None,
) -> TileForward:
    """The call's output and what its backward pass needs; ``scale`` and ``eps`` in base 2 (euclid's times ln 2),
    ``rule``: whether eps is folded into the squared distances (1/sqrt(d^2 + eps^2)), and the squared distance at or
    below which a row is exact whatever its norm. q (N, Lq, D), k (N, Lk, D), v (N, Lk, Dv); ``blocked`` True where a
    query may not attend (broadcast to (N, Lq, Lk)); ``kept``: memory for ``e`` and ``pw`` kept for the backward
    pass, or None (no backward pass: the thread's workspace)."""
    shape = (q.shape[0], q.shape[1], k.shape[1])
    into_e, into_pw = kept if kept is not None else (workspace(2, shape, q), workspace(1, shape, q))
    s2, (folded, floor) = scale * scale, rule
    q_sq = torch.linalg.vecdot(q, q).unsqueeze_(-1)  # (N, Lq, 1), unscaled
    k_sq = torch.linalg.vecdot(k, k)
    if folded:
        k_sq.add_(eps * eps / s2)
    x = torch.add(q_sq, k_sq.unsqueeze_(-2), out=into_pw if folded else workspace(0, shape, q))
    x.baddbmm_(q, k.transpose(1, 2), beta=s2, alpha=-2.0 * s2)  # s2 ||q - k||^2 (+ eps^2), (N, Lq, Lk)
    if blocked is not None:
        x.masked_fill_(blocked, FAR)
    thr = q_sq.mul_(s2 * ROW_NEAR).clamp_min_(floor)  # (N, Lq, 1): exact at or below
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
    at = kept_near_rows(z, s, z_thr)
    if at is not None:
        group = at.div(q.shape[1], rounding_mode="floor")
        q_at = q.view(-1, q.shape[-1]).index_select(0, at)
        stop = None if blocked is None else blocked.expand(*shape).reshape(-1, shape[-1])[at]
        diffs, e_at, pw_at = exact_weights(q_at, k, group, stop, s2, eps)
        exact = KeptExact(at, group, diffs)
        e.view(-1, shape[-1]).index_copy_(0, at, e_at)
        s.view(-1, 1).index_copy_(0, at, e_at.sum(-1, keepdim=True))
    if blocked is not None:
        s = torch.where(s > 0, s, 1.0)  # a query with nothing to attend to gives zeros
    out = torch.bmm(e, v) if v.dtype == e.dtype else torch.bmm(e.to(v.dtype), v).float()
    out.div_(s)
    pw = None
    if kept is not None:
        # z^3 = z^2 / d where z = 1/sqrt(d^2 + eps^2), to rounding in general rows
        pw = z.pow_(3).mul_(e) if d is None else z.square_().div_(d).mul_(e)
        if at is not None:
            pw.view(-1, shape[-1]).index_copy_(0, at, pw_at)
    return TileForward(out, e, s, pw, exact)
