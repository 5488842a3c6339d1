"""Euclidean distance from dot products and squared norms, and the euclid score 1 / (distance * scale + eps).

The one definition every euclid path uses: the explicit formula, FlexAttention's score_mod and the
tiled kernel's forward and backward passes.
"""

from __future__ import annotations

import torch
from torch import Tensor

TINY = 1e-30  # squared distances below this count as 0 for the gradient of the square root


def finite_sqrt(x: Tensor) -> Tensor:
    """sqrt of x >= 0 with gradient 0 (not inf) at 0, and for x below TINY."""
    return torch.where(x > 0, x.clamp_min(TINY).sqrt(), torch.zeros_like(x))


def score(dot: Tensor, q_sq: Tensor, k_sq: Tensor, scale: float, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """Squared distance ||q - k||^2 = ||q||^2 + ||k||^2 - 2 q.k (clamped at 0), the distance, and the score
    1 / (distance * scale + eps), from q.k and the squared norms (broadcast against each other)."""
    squared = (q_sq + k_sq - 2.0 * dot).clamp_min(0.0)
    distance = finite_sqrt(squared)
    return squared, distance, 1.0 / (distance * scale + eps)


def euclid_score(q: Tensor, k: Tensor, scale: float, eps: float) -> Tensor:
    """The score of every query and key row.  # (..., Lq, D), (..., Lk, D) -> (..., Lq, Lk)"""
    q_sq, k_sq = (q * q).sum(-1, keepdim=True), (k * k).sum(-1).unsqueeze(-2)  # (..., Lq, 1), (..., 1, Lk)
    return score(q @ k.transpose(-2, -1), q_sq, k_sq, scale, eps)[2]
