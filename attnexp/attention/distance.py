"""Euclidean distance from dot products and squared norms, and the scores built on it: euclid's
1 / (distance * scale + eps) and l2's -distance^2 * scale.

The one definition every path uses: the explicit formulas, FlexAttention's score_mod and the tiled
kernel's forward and backward passes.
"""

from __future__ import annotations

import torch
from torch import Tensor

TINY = 1e-30  # squared distances below this count as 0 for the gradient of the square root


def finite_sqrt(x: Tensor) -> Tensor:
    """sqrt of x >= 0 with gradient 0 (not inf) at 0, and for x below TINY."""
    return torch.where(x > 0, x.clamp_min(TINY).sqrt(), torch.zeros_like(x))


def squared_distance(dot: Tensor, q_sq: Tensor, k_sq: Tensor) -> Tensor:
    """||q - k||^2 = ||q||^2 + ||k||^2 - 2 q.k from q.k and the squared norms (broadcast), clamped at 0."""
    return (q_sq + k_sq - 2.0 * dot).clamp_min(0.0)


def score(dot: Tensor, q_sq: Tensor, k_sq: Tensor, scale: float, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """The squared distance, the distance, and the euclid score 1 / (distance * scale + eps)."""
    squared = squared_distance(dot, q_sq, k_sq)
    distance = finite_sqrt(squared)
    return squared, distance, 1.0 / (distance * scale + eps)


def row_norms(q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
    """Squared norms of the query rows and of the key rows.  # (..., Lq, 1), (..., 1, Lk)"""
    return (q * q).sum(-1, keepdim=True), (k * k).sum(-1).unsqueeze(-2)


def euclid_score(q: Tensor, k: Tensor, scale: float, eps: float) -> Tensor:
    """The euclid score of every query and key row.  # (..., Lq, D), (..., Lk, D) -> (..., Lq, Lk)"""
    q_sq, k_sq = row_norms(q, k)  # before q.k: the order of the backward's sums keeps earlier runs' numbers
    return score(q @ k.transpose(-2, -1), q_sq, k_sq, scale, eps)[2]


def l2_score(q: Tensor, k: Tensor, scale: float) -> Tensor:
    """-||q - k||^2 * scale of every query and key row.  # (..., Lq, D), (..., Lk, D) -> (..., Lq, Lk)"""
    q_sq, k_sq = row_norms(q, k)
    return -squared_distance(q @ k.transpose(-2, -1), q_sq, k_sq) * scale
