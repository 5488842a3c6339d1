"""The euclid mixer: softmax(1 / (||q - k|| * d^-0.5 + eps)) v, and the choice of the path that computes it."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnexp.mixers.euclid.formula import check_eps, euclid_score
from attnexp.mixers.euclid.ops.fused import fused_euclid_attention
from attnexp.mixers.euclid.ops.kernel import available, triton_euclid_attention
from attnexp.mixers.multihead import EXPLICIT, MultiHeadAttention, attention


class EuclidAttention(MultiHeadAttention):
    """softmax(1 / (||q - k|| * d^-0.5 + eps)) v.

    A key equal to its query scores 1/eps and the square root's gradient there is 0, so that key takes (almost)
    all the weight and the gradient stays finite. Keys near their query get their distance from the difference
    (see :mod:`~attnexp.mixers.euclid.formula`). Paths (``model.path``): ``explicit`` (the formula through
    autograd) and ``fused`` (``auto``'s choice), which runs the algorithm that fits the device: on a GPU with Triton
    one kernel (:mod:`~attnexp.mixers.euclid.ops.kernel`); on a CPU outside a compiled graph the rows that need
    exact distances found by reading the data (:mod:`~attnexp.mixers.euclid.ops.rows`); in a compiled graph on a
    CPU, and on a GPU without Triton, fixed shapes and no host reads (:mod:`~attnexp.mixers.euclid.ops.fixed`).
    """

    fused_paths = ("fused",)
    fused_dropout = False

    def __init__(self, dim: int, *, eps: float = 1e-9, **options: Any) -> None:
        super().__init__(dim, **options)
        self.eps = check_eps(eps)

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return euclid_score(q, k, self.head_dim**-0.5, self.eps)  # (B, H, Lq, Lk)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """As every attention mixer's, with the mask passed to the score: a blocked key is never a query's nearest."""
        if self.path_for(q.device, need_weights) != EXPLICIT:
            return super().attend(q, k, v, mask, need_weights)
        full = self.full_mask(mask, q, k)
        scores = euclid_score(q.float(), k.float(), self.head_dim**-0.5, self.eps, full)  # (B, H, Lq, Lk)
        out, weights = attention(scores, v, full, self.dropout if self.training else 0.0, self.normalise)
        return out, weights if need_weights else None

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str) -> Tensor:
        scale = self.head_dim**-0.5
        # The kernel where it runs, the causal mask as its flag (no (Lq, Lk) tensor); float64 excepted: the kernel
        # refuses it, the torch path takes it (with float32 distances, as on every device); and deterministic
        # algorithms asked for (trainer.deterministic=true): the kernel sums dq with atomic adds, whose last bits vary
        # from run to run, as flash attention's backward does; the torch path's sums do not.
        if available(q.device) and q.dtype != torch.float64 and not torch.are_deterministic_algorithms_enabled():
            return triton_euclid_attention(q, k, v, mask, self.causal, scale, self.eps)  # (B, H, Lq, Dv)
        return fused_euclid_attention(q, k, v, self.full_mask(mask, q, k), scale, self.eps)  # (B, H, Lq, Dv)
