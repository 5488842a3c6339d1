"""ReLU attention (Wortsman et al. 2023, "Replacing softmax with ReLU in Vision Transformers"): relu(q.k / sqrt(d)) / n.

A mixer of your own, kept outside attnexp: a subclass of attnexp's MultiHeadAttention gets the projections, heads,
masks, dropout and the conformance kit's contract for free, and says only what is new: the score and the normaliser.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnexp.mixers import NON_NEGATIVE, MultiHeadAttention


class ReluAttention(MultiHeadAttention):
    """relu(q.k / sqrt(d)) / n, n the number of keys the row may see: weights that are no distributions."""

    weight_kind = NON_NEGATIVE  # rows need not sum to 1: the kit asks no sum, telemetry logs their mass, not an entropy

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ k.transpose(-2, -1)) * self.head_dim**-0.5  # (B, H, Lq, Lk)

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        """Masked scores arrive as -inf, which relu turns into 0."""
        keys = scores.shape[-1] if mask is None else mask.sum(-1, keepdim=True).clamp_min(1)
        return torch.relu(scores) / keys  # (B, H, Lq, Lk)
