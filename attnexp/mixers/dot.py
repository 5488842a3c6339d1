"""Scaled dot-product attention (``model=dot``; ``model=masked`` is the same with ``causal: true``)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from attnexp.mixers.multihead import MultiHeadAttention, zero_empty_rows


class DotAttention(MultiHeadAttention):
    """softmax(q.k / sqrt(d)) v; the fused path is ``F.scaled_dot_product_attention``."""

    fused_paths = ("sdpa",)

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ k.transpose(-2, -1)) * self.head_dim**-0.5  # (B, H, Lq, Lk)

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str) -> Tensor:
        mask = None if mask is None else self.full_mask(mask, q, k)
        dropout = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=self.causal and mask is None)
        return zero_empty_rows(out, mask)  # (B, H, Lq, D)
