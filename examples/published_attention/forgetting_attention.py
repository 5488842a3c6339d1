"""Forgetting attention, the token mixing of the Forgetting Transformer (Lin, Nikishin, He and Courville 2025,
"Forgetting Transformer: Softmax Attention with a Forget Gate", ICLR 2025, arXiv:2503.02130).

Each token t computes a forget gate per head from its own input, f_t = sigmoid(w_f . x_t + b_f), and softmax
attention is down-weighted by the gates between a key and its query:

    out = softmax(Q K^T / sqrt(d) + D) V,    D_ij = sum_{j < l <= i} log f_l    (j <= i; -inf after i),

computed from the prefix sums c = cumsum(log f) as D_ij = c_i - c_j. The gate needs each token's input, which the
score never sees: the mixer computes it in the :meth:`tokens` hook (from the tokens, before the projections), and
the gate reaches :meth:`score` and the fused path as their ``tokens`` argument. It is defined for causal attention
(``causal_only = True``) and its decay carries the order of the tokens (``permutation_equivariant = False``; the
paper trains without position embeddings). The weights are softmax's: distributions. The fused path is one
scaled dot-product attention call with D as its additive mask (the authors' kernel is a FlashAttention with it).
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn

from attnexp.mixers import MultiHeadAttention, zero_empty_rows


class ForgettingAttention(MultiHeadAttention):
    """Softmax attention plus the forget gates' decay D, one scalar gate per token and head (the paper's basic FoX,
    without the Pro block's output gate, QK-norm and shifts). The gate's projection starts as torch's default, as
    the authors' does by default."""

    fused_paths = ("sdpa",)
    permutation_equivariant = False  # the decay depends on the order of the tokens
    causal_only = True

    def __init__(self, dim: int, **options: Any) -> None:
        super().__init__(dim, **options)
        self.forget = nn.Linear(dim, self.heads)  # w_f, b_f for every head

    def tokens(self, x: Tensor, context: Tensor) -> Tensor:
        """log f of every token and head, from the tokens before the projections.  # (B, H, L)"""
        return F.logsigmoid(self.forget(context).float()).transpose(1, 2)

    def decay(self, log_forget: Tensor, queries: int) -> Tensor:
        """D_ij = c_i - c_j, c the prefix sums of log f (queries: the last ``queries`` tokens).  # (B, H, Lq, Lk)"""
        c = log_forget.cumsum(-1)  # (B, H, Lk)
        return c[..., -queries:, None] - c[..., None, :]

    def score(self, q: Tensor, k: Tensor, tokens: Tensor) -> Tensor:
        return (q @ k.transpose(-2, -1)) * self.head_dim**-0.5 + self.decay(tokens, q.shape[-2])  # (B, H, Lq, Lk)

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str, tokens: Tensor) -> Tensor:
        """One SDPA call, D (hidden and later keys at -inf) as its additive mask.  # (B, H, Lq, D)"""
        allowed = self.full_mask(mask, q, k)
        bias = self.decay(tokens, q.shape[-2])
        if allowed is not None:
            bias = bias.masked_fill(~allowed, float("-inf"))
        dropout = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), dropout_p=dropout)
        return zero_empty_rows(out, allowed)
