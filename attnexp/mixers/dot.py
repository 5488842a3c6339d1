"""Scaled dot-product attention (``model=dot``; ``model=masked`` is the same with ``causal: true``)."""

from __future__ import annotations

from torch import Tensor

from attnexp.mixers.multihead import MultiHeadAttention


class DotAttention(MultiHeadAttention):
    """softmax(q.k / sqrt(d)) v; the fused path is ``F.scaled_dot_product_attention``."""

    fused_paths: tuple[str, ...] = ("sdpa",)

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ k.transpose(-2, -1)) * self.head_dim**-0.5  # (B, H, Lq, Lk)

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str) -> Tensor:
        return self.sdpa(q, k, v, mask)  # (B, H, Lq, D)
