"""Token mixers: the attention mixers and the non-attention baselines (``model=``), one constructor contract
and one call signature (see :mod:`attnexp.mixers.contract`)."""

from attnexp.mixers.contract import (
    DISTRIBUTIONS,
    NON_NEGATIVE,
    SIGNED,
    WEIGHT_KINDS,
    TokenMixer,
    build_mixer,
    check_inputs,
    weight_kind,
)
from attnexp.mixers.cosine import CosineAttention
from attnexp.mixers.dot import DotAttention
from attnexp.mixers.euclid import EuclidAttention
from attnexp.mixers.l2 import L2Attention
from attnexp.mixers.mlp import DenseMixer
from attnexp.mixers.multihead import (
    MultiHeadAttention,
    attention,
    attention_weights,
    causal_mask,
    softmax,
    zero_empty_rows,
)
from attnexp.mixers.request import MixerRequest, is_mixer
from attnexp.mixers.se import SqueezeExcitation
from attnexp.mixers.sigmoid import SigmoidAttention

__all__ = [
    "DISTRIBUTIONS",
    "NON_NEGATIVE",
    "SIGNED",
    "WEIGHT_KINDS",
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
    "attention_weights",
    "build_mixer",
    "causal_mask",
    "check_inputs",
    "is_mixer",
    "softmax",
    "weight_kind",
    "zero_empty_rows",
]
