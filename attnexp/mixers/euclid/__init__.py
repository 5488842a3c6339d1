"""Scaled Euclidean-distance attention (``model=euclid``): the mixer, its formula and its fused paths."""

from attnexp.mixers.euclid.mixer import EuclidAttention

__all__ = ["EuclidAttention"]
