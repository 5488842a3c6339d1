"""Differential attention (Ye, Dong, Xia, Sun, Zhu, Huang and Wei 2024, "Differential Transformer", arXiv:2410.05258).

Each head splits its queries and keys in two halves and attends with the difference of the two softmax maps,

    DiffAttn(X) = (softmax(Q1 K1^T / sqrt(d)) - lambda softmax(Q2 K2^T / sqrt(d))) V,
    lambda = exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init,

d being half a head's width; each head's output then goes through an RMSNorm and is scaled by (1 - lambda_init). The
weights are signed by design (``weight_kind = "signed"``): the second map cancels attention noise. The mechanism is
no score and normaliser, so the mixer writes :meth:`attend` (no ``score``); its fused path is the authors' own,
two scaled dot-product attention calls (their FlashAttention version), beside the explicit formula.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers import SIGNED, MultiHeadAttention, attention_weights, zero_empty_rows


class DiffAttention(MultiHeadAttention):
    """Differential attention over ``heads`` heads of dim/heads channels: queries and keys of half that width per map,
    values of the full width. ``lambda_init``: the paper sets 0.8 - 0.6 exp(-0.3 (l - 1)) for layer l, which a mixer,
    built without its depth, cannot know; the paper's ablation with the constant 0.8 (its Table 6) trained as well,
    hence the default. The lambda vectors start from N(0, 0.1) as in the authors' code."""

    weight_kind = SIGNED  # a difference of two maps: weights of either sign, rows summing to 1 - lambda
    fused_paths = ("sdpa",)

    def __init__(self, dim: int, *, lambda_init: float = 0.8, **options: Any) -> None:
        super().__init__(dim, **options)
        if self.head_dim % 2:
            raise AttnexpError(
                f"differential attention splits each head's queries and keys in two halves, so dim/heads must be "
                f"even; got dim={dim}, heads={self.heads}. Pick a width with net.dim (e.g. 64) or other heads."
            )
        if not 0.0 <= lambda_init < 1.0:
            raise AttnexpError(
                f"model.lambda_init={lambda_init} is not allowed: the output is scaled by 1 - lambda_init, so "
                "it lies in [0, 1) (the paper: 0.8, or 0.8 - 0.6 exp(-0.3 (layer - 1)))."
            )
        half = self.head_dim // 2
        self.lambda_init = lambda_init
        self.lambdas = nn.Parameter(torch.randn(4, half) * 0.1)  # lq1, lk1, lq2, lk2
        self.norm_gain = nn.Parameter(torch.ones(self.head_dim))  # the per-head RMSNorm's gain

    def lam(self) -> Tensor:
        lq1, lk1, lq2, lk2 = self.lambdas.float()
        return torch.exp((lq1 * lk1).sum()) - torch.exp((lq2 * lk2).sum()) + self.lambda_init  # a scalar

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool
    ) -> tuple[Tensor, Tensor | None]:
        """(A1 - lambda A2) v per head, RMSNorm, times (1 - lambda_init).  # q, k, v: (B, H, L, D) -> (B, H, Lq, D)"""
        half = self.head_dim // 2
        (q1, q2), (k1, k2) = q.split(half, dim=-1), k.split(half, dim=-1)  # (B, H, L, D/2) each
        lam = self.lam()
        dropout = self.dropout if self.training else 0.0
        weights = None
        if self.path_for(q.device, need_weights) == "sdpa":
            mask = None if mask is None else self.full_mask(mask, q, k)
            pad = (
                0,
                self.head_dim - half,
            )  # zeros leave the dot products as they are; q, k and v of one width run the fused kernels
            maps = [
                F.scaled_dot_product_attention(
                    F.pad(a, pad),
                    F.pad(b, pad),
                    v,
                    attn_mask=mask,
                    dropout_p=dropout,
                    is_causal=self.causal and mask is None,
                    scale=half**-0.5,
                )
                for a, b in ((q1, k1), (q2, k2))
            ]
            out = zero_empty_rows(maps[0] - lam.to(v.dtype) * maps[1], mask)
        else:
            mask = self.full_mask(mask, q, k)
            scores = [
                (a.float() @ b.float().transpose(-2, -1)) * half**-0.5 for a, b in ((q1, k1), (q2, k2))
            ]  # (B, H, Lq, Lk)
            weights = (attention_weights(scores[0], mask) - lam * attention_weights(scores[1], mask)).to(v.dtype)
            out = F.dropout(weights, dropout, training=dropout > 0) @ v
        out = (
            out
            * torch.rsqrt(out.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(out.dtype)
            * self.norm_gain.to(out.dtype)
        )
        return out * (1.0 - self.lambda_init), weights if need_weights else None
