"""Token mixers: attention variants and the non-attention baselines, one constructor contract and one
call signature (see :mod:`attnexp.attention.contract`)."""

from attnexp.attention.contract import TokenMixer
from attnexp.attention.dot import DotAttention
from attnexp.attention.euclid import EuclidAttention
from attnexp.attention.mixers import DenseMixer, SqueezeExcitation
from attnexp.attention.multihead import MultiHeadAttention, causal_mask, softmax_attention

__all__ = [
    "DenseMixer",
    "DotAttention",
    "EuclidAttention",
    "MultiHeadAttention",
    "SqueezeExcitation",
    "TokenMixer",
    "causal_mask",
    "softmax_attention",
]
