"""The euclid mixer: softmax(1 / (||q - k|| * d^-0.5 + eps)) v, and the choice of the path that computes it."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnexp.mixers.euclid.formula import check_eps, euclid_score
from attnexp.mixers.euclid.ops.flex import flex_euclid_attention
from attnexp.mixers.euclid.ops.fused import fused_euclid_attention
from attnexp.mixers.multihead import MultiHeadAttention


class EuclidAttention(MultiHeadAttention):
    """softmax(1 / (||q - k|| * d^-0.5 + eps)) v.

    A key equal to its query scores 1/eps and the square root's gradient there is 0, so that key takes (almost)
    all the weight and the gradient stays finite. Distances are exact where it matters (see
    :mod:`~attnexp.mixers.euclid.formula`). Paths (``model.path``), all giving the formula's numbers up to float32
    rounding: ``explicit`` (the formula through autograd), ``fused`` (one autograd function in torch operations,
    :mod:`~attnexp.mixers.euclid.ops.fused`; ``auto``'s choice on every device), ``flex`` (FlexAttention, by name:
    on an H200 it took 1.5-2.6 times fused's time, docs/benchmarks.md). Under ``torch.compile`` and
    ``torch.export`` the explicit formula runs, with every distance from the difference (the compiler fuses it).
    """

    fused_paths = ("fused", "flex")
    fused_dropout = False

    def __init__(self, dim: int, *, eps: float = 1e-9, **options: Any) -> None:
        super().__init__(dim, **options)
        self.eps = check_eps(eps)

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return euclid_score(q, k, self.head_dim**-0.5, self.eps)  # (B, H, Lq, Lk)

    def path_for(self, device: torch.device, need_weights: bool = False) -> str:
        return "explicit" if torch.compiler.is_compiling() else super().path_for(device, need_weights)

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str) -> Tensor:
        fn = flex_euclid_attention if path == "flex" else fused_euclid_attention
        return fn(q, k, v, self.full_mask(mask, q, k), self.head_dim**-0.5, self.eps)  # (B, H, Lq, Dv)
