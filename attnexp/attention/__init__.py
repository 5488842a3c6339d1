"""Attention variants sharing one call signature: ``forward(x, context=None, mask=None, need_weights=False)``."""

from attnexp.attention.multihead import (
    DotAttention,
    EuclidAttention,
    MaskedAttention,
    MultiHeadAttention,
    causal_mask,
    pairwise_distance,
)
from attnexp.attention.build import build_mixer
from attnexp.attention.mixers import DenseMixer, SqueezeExcitation

__all__ = [
    "DenseMixer",
    "DotAttention",
    "EuclidAttention",
    "MaskedAttention",
    "MultiHeadAttention",
    "SqueezeExcitation",
    "build_mixer",
    "causal_mask",
    "pairwise_distance",
]
