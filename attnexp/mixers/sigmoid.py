"""Sigmoid attention (``model=sigmoid``): sigmoid(q.k / sqrt(d) + b) v, after Ramapuram et al. (2024)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from attnexp.errors import AttnexpError
from attnexp.mixers.contract import NON_NEGATIVE
from attnexp.mixers.dot import DotAttention


class SigmoidAttention(DotAttention):
    """Dot's scores, each weight a sigmoid on its own: the weights of a row need not sum to 1 (``weight_kind`` is
    non-negative), so a query may take much or little from its keys. ``score_bias`` is b; ``None`` (the default) is
    b = -log n, n the number of keys the row may see under the causal and padding masks, which starts every
    weight near 1/n as softmax's uniform start (the paper's choice of b for a stable start). Masked keys get
    weight 0 (sigmoid of -inf), so a row with no key to see outputs zeros. There is no fused path: the formula
    runs through autograd (``model.path`` is ``auto`` or ``explicit``).
    """

    fused_paths = ()
    weight_kind = NON_NEGATIVE

    def __init__(self, dim: int, *, score_bias: float | None = None, **options: Any) -> None:
        super().__init__(dim, **options)
        if score_bias is not None and (
            isinstance(score_bias, bool) or not isinstance(score_bias, (int, float)) or not math.isfinite(score_bias)
        ):
            raise AttnexpError(
                f"model.score_bias={score_bias!r} is not allowed: it is b in sigmoid(q.k/sqrt(d) + b), a "
                "finite number such as -2.0, or null for b = -log n (n: the keys each row may see)."
            )
        self.score_bias = score_bias

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        return torch.sigmoid(scores + self.bias(scores, mask))  # (B, H, Lq, Lk)

    def bias(self, scores: Tensor, mask: Tensor | None) -> Tensor | float:
        """b: ``score_bias``, or -log n with n the keys each row may see.  # a number, or (B|1, H|1, Lq|1, 1)"""
        if self.score_bias is not None:
            return float(self.score_bias)
        if mask is None:
            return -math.log(max(scores.shape[-1], 1))
        return -mask.sum(-1, keepdim=True).clamp_min(1).to(scores.dtype).log()
