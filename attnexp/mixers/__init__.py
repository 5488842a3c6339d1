"""Token mixers: the attention mixers and the non-attention baselines (``model=``), one constructor contract
and one call signature (see :mod:`attnexp.mixers.contract`)."""

from attnexp.mixers.contract import MixerRequest, TokenMixer, build_mixer, check_inputs, is_mixer
from attnexp.mixers.cosine import CosineAttention
from attnexp.mixers.dot import DotAttention
from attnexp.mixers.euclid import EuclidAttention
from attnexp.mixers.l2 import L2Attention
from attnexp.mixers.mlp import DenseMixer
from attnexp.mixers.multihead import MultiHeadAttention, attention, causal_mask, softmax
from attnexp.mixers.se import SqueezeExcitation
from attnexp.mixers.sigmoid import SigmoidAttention

__all__ = [
    "CosineAttention",
    "DenseMixer",
    "DotAttention",
    "EuclidAttention",
    "L2Attention",
    "MixerRequest",
    "MultiHeadAttention",
    "SigmoidAttention",
    "SqueezeExcitation",
    "TokenMixer",
    "attention",
    "build_mixer",
    "causal_mask",
    "check_inputs",
    "is_mixer",
    "softmax",
]
