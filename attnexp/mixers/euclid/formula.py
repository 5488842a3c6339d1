"""Euclid's score, 1 / (||q - k|| * scale + eps), and where its distances must be computed exactly.

Every path gets the squared distance from one matmul, ``||q||^2 + ||k||^2 - 2 q.k``. That expansion carries
an absolute rounding error of a few float32 ulps of ``||q||^2 + ||k||^2``: harmless for most pairs, but for a
key close to its query (where euclid puts its weight, the score growing like 1/distance) it can exceed the
distance itself. So a pair whose expanded squared distance is at most :data:`NEAR` times ``||q||^2 + ||k||^2``
is recomputed as ``||q - k||^2``; elsewhere the expansion's relative error in the distance stays below ~1e-5.
Rows are found by their minimum (:func:`near_rows`) and recomputed whole, on every path, forward and backward.

The gradient, with ``x = scale^2 ||q - k||^2``, ``d = sqrt(x)``, ``z = 1 / (d + eps)``, ``p = softmax(z)``::

    g  = p * (dp - rowsum(p * dp)) * z^2 / d        dLoss/dx times -2, 0 where d = 0 (a key equal to its query)
    dq = -scale^2 sum_j g_ij (q_i - k_j)       dk = scale^2 sum_i g_ij (q_i - k_j)       dv = p^T dout

computed as ``-scale^2 (rowsum(g) q - g k)`` and ``scale^2 (g^T q - colsum(g) k)`` except in near rows.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnexp.errors import AttnexpError

NEAR = 1.0 / 64  # squared distances below this share of ||q||^2 + ||k||^2 are recomputed as ||q - k||^2
# A near pair has ||k||^2 <= 1.43 ||q||^2 (the triangle inequality at NEAR), so every row holding one has a
# squared distance below ROW_NEAR * ||q||^2: one comparison per row finds the candidates.
ROW_NEAR = NEAR * 2.4275
TINY = 1e-30  # squared distances below this count as 0 for the gradient of the square root
FLOAT32_MAX = float(torch.finfo(torch.float32).max)


def check_eps(eps: object) -> float:
    """``model.eps`` as a float, or an error saying why: the score at distance 0 is 1/eps, a float32."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        raise AttnexpError(f"model.eps={eps!r} is not allowed: the euclid score is 1/(distance + eps), so eps must be a "
                           "positive number such as 1e-9.")
    if not 2.0 / eps < FLOAT32_MAX:  # 2/eps: the fused path's base-2 score is log2(e) = 1.44 times the score
        raise AttnexpError(f"model.eps={eps!r} is too small: the euclid score of a key equal to its query is 1/eps, "
                           f"which must stay well inside float32 (largest {FLOAT32_MAX:.3g}): below "
                           f"eps = {2 / FLOAT32_MAX:.3g} its row would become NaN. Use e.g. model.eps=1e-9.")
    return float(eps)


def near_rows(low: Tensor, q_sq: Tensor, s2: float) -> tuple[Tensor, ...] | None:
    """The query rows that may hold a pair to recompute, as indices of their leading dims and query (a tuple for
    indexing), or None. ``low``: each row's smallest ``scale^2 ||q - k||^2`` by the expansion; ``q_sq``: the
    squared query norms, unscaled; both (..., Lq, 1)."""
    if not float(torch.sub(low, q_sq, alpha=ROW_NEAR * s2).min()) <= 0:  # no such row (or NaN, which spreads anyway)
        return None
    return (low <= (ROW_NEAR * s2) * q_sq)[..., 0].nonzero(as_tuple=True)


def row_differences(q: Tensor, k: Tensor, rows: tuple[Tensor, ...]) -> Tensor:
    """``q_i - k_j`` for the query rows ``rows`` of (..., Lq, D) inputs and every key.  # (m, Lk, D)"""
    return q[rows].unsqueeze(-2) - k[rows[:-1]]


def exact_rows(q: Tensor, k: Tensor, rows: tuple[Tensor, ...], scale: float) -> Tensor:
    """``scale^2 ||q_i - k_j||^2`` from the differences, for the query rows ``rows`` of (..., Lq, D) inputs.  # (m, Lk)"""
    return row_differences(q, k, rows).square().sum(-1) * (scale * scale)


def finite_sqrt(x: Tensor) -> Tensor:
    """sqrt of x >= 0 with gradient 0 (not inf) at 0, and for x below TINY; NaN stays NaN."""
    return torch.where(x > 0, x.clamp_min(TINY).sqrt(), x * 0.0)


def squared_distances(q: Tensor, k: Tensor, scale: float) -> Tensor:
    """``scale^2 ||q - k||^2`` of every query and key row, exact in near rows; differentiable (the explicit path).
    # (..., Lq, D), (..., Lk, D) -> (..., Lq, Lk)"""
    s2 = scale * scale
    if torch.compiler.is_compiling():  # no data-dependent rows in a graph: every distance from the difference
        return (q.unsqueeze(-2) - k.unsqueeze(-3)).square().sum(-1) * s2
    q_sq, k_sq = (q * q).sum(-1, keepdim=True), (k * k).sum(-1).unsqueeze(-2)
    x = ((q_sq + k_sq - 2.0 * (q @ k.transpose(-2, -1))) * s2).clamp_min(0.0)
    if x.numel() == 0:
        return x
    rows = near_rows(x.detach().amin(-1, keepdim=True), q_sq.detach(), s2)
    return x if rows is None else x.index_put(rows, exact_rows(q, k, rows, scale))


def euclid_score(q: Tensor, k: Tensor, scale: float, eps: float) -> Tensor:
    """1 / (||q - k|| * scale + eps) of every query and key row.  # (..., Lq, D), (..., Lk, D) -> (..., Lq, Lk)"""
    return 1.0 / (finite_sqrt(squared_distances(q, k, scale)) + eps)
