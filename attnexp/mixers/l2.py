"""L2 attention (``model=l2``): softmax(-||q - k||^2 / sqrt(d)) v, after Kim, Papamakarios and Mnih (2021)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from attnexp.mixers.multihead import MultiHeadAttention


class L2Attention(MultiHeadAttention):
    """Negative squared distance as the score; ``tied_qk`` shares the query and key projection (W_K = W_Q),
    which makes the layer Lipschitz.

    Fused path: -||q - k||^2 = 2 q.k - ||k||^2 - ||q||^2, and ||q||^2 is the same for every key of a
    query, so the softmax does not see it: q' = [q, 1/2] and k' = [k, -||k||^2] at twice the scale give the same weights
    through one ``F.scaled_dot_product_attention`` call (v gets a zero column: the fused kernels take no
    v narrower than q and k). The score is smooth in the squared distance, so the expansion's rounding near
    q = k moves it by float32 rounding only (euclid's 1/distance is what needs the exact difference there).
    """

    fused_paths = ("sdpa",)

    def __init__(self, dim: int, *, tied_qk: bool = False, **options: Any) -> None:
        super().__init__(dim, **options)
        self.tied_qk = tied_qk
        if tied_qk:
            self.k_proj = self.q_proj  # one module: its weights are shared and counted once

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        q_sq, k_sq = (q * q).sum(-1, keepdim=True), (k * k).sum(-1).unsqueeze(-2)  # (B, H, Lq, 1), (B, H, 1, Lk)
        return -(q_sq + k_sq - 2.0 * (q @ k.transpose(-2, -1))).clamp_min(0.0) * self.head_dim**-0.5  # (B, H, Lq, Lk)

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str) -> Tensor:
        q_aug = F.pad(q, (0, 1), value=0.5)  # (B, H, Lq, D+1): [q, 1/2], the factor 2 goes into the scale
        k_aug = torch.cat([k, -(k * k).sum(-1, keepdim=True)], dim=-1)  # (B, H, Lk, D+1)
        v_aug = F.pad(v, (0, 1))  # (B, H, Lk, D+1): SDPA's fused kernels need v as wide as q and k
        return self.sdpa(q_aug, k_aug, v_aug, mask, scale=2.0 * self.head_dim**-0.5)[..., :-1]  # (B, H, Lq, D)
