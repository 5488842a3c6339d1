"""Token mixers: the attention mixers and the non-attention baselines (``model=``), one constructor contract
and one call signature (see :mod:`attnexp.mixers.contract`)."""

from attnexp.mixers.contract import TokenMixer
from attnexp.mixers.cosine import CosineAttention
from attnexp.mixers.dot import DotAttention
from attnexp.mixers.euclid import EuclidAttention
from attnexp.mixers.l2 import L2Attention
from attnexp.mixers.mlp import DenseMixer
from attnexp.mixers.multihead import MultiHeadAttention, causal_mask, softmax_attention
from attnexp.mixers.se import SqueezeExcitation

__all__ = [
    "CosineAttention",
    "DenseMixer",
    "DotAttention",
    "EuclidAttention",
    "L2Attention",
    "MultiHeadAttention",
    "SqueezeExcitation",
    "TokenMixer",
    "causal_mask",
    "softmax_attention",
]
