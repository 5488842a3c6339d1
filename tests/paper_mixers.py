"""Three recent mechanisms written as a new user writes them from their papers, each correct and with the bug of a
first draft: multi-token attention's key convolution (Golovneva et al. 2025), retention (Sun et al. 2023, RetNet)
and selective attention (Leviathan et al. 2024). Small, for the kit's, the run's and the comparison's tests (and a
user folder's in the CLI tests: copied beside its configs)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers import DotAttention, MultiHeadAttention, attention, causal_mask, zero_empty_rows

NEG = float("-inf")


class KeyConvAttention(MultiHeadAttention):
    """Multi-token attention's key convolution: each head's logits convolved over the keys (3 taps) before the
    softmax, the kernel starting as the identity, as the paper initialises it. The logits a query may not see are
    zeroed first (the paper masks before the convolution and again after), so no later or hidden key reaches a
    visible one."""

    permutation_equivariant = False  # the convolution reads the order of the keys

    def __init__(self, dim: int, **options) -> None:
        super().__init__(dim, **options)
        kernel = torch.zeros(self.heads, 1, 1, 3)
        kernel[..., 1] = 1.0  # the identity: plain dot attention at the start
        self.kernel = nn.Parameter(kernel)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool):
        allowed = self.full_mask(mask, q, k)
        logits = (q @ k.transpose(-2, -1)).float() * self.head_dim**-0.5  # (B, H, Lq, Lk)
        logits = self.before_convolution(logits, allowed)
        scores = F.conv2d(logits, self.kernel, padding=(0, 1), groups=self.heads)  # over the keys
        out, weights = attention(self.hook_scores(scores), v, allowed, self.dropout if self.training else 0.0)
        return out, weights if need_weights else None

    def before_convolution(self, logits: Tensor, allowed: Tensor | None) -> Tensor:
        return logits if allowed is None else logits.masked_fill(~allowed, 0.0)


class KeyConvLeaks(KeyConvAttention):
    """The first draft: the convolution over the raw logits, masked after it only. A key's score takes its right
    neighbour's logit, so once the kernel moves from the identity the next token leaks into every query."""

    def before_convolution(self, logits: Tensor, allowed: Tensor | None) -> Tensor:
        return logits


class Retention(MultiHeadAttention):
    """Retention, RetNet's parallel form: weights (q k^T / sqrt(d)) * gamma^(i - j) for keys j <= i, signed, no
    normaliser; one decay gamma for every head. Its recurrent form, S_i = gamma S_(i-1) + k_i^T v_i and
    out_i = q_i S_i / sqrt(d), is the fused path ``recurrent``; ``auto`` trains with the parallel form."""

    fused_paths = ("recurrent",)
    weight_kind = "signed"
    permutation_equivariant = False
    causal_only = True

    def __init__(self, dim: int, gamma: float = 0.9, **options) -> None:
        super().__init__(dim, **options)
        self.gamma = gamma

    def auto_path(self, device: torch.device, head_dim: int) -> str:
        return "explicit"  # the parallel form: faster than a Python loop over the tokens at these lengths

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ k.transpose(-2, -1)) * self.head_dim**-0.5  # (B, H, Lq, Lk)

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        lq, lk = scores.shape[-2:]
        return torch.where(torch.isinf(scores), 0.0, scores * self.decay(lq, lk, scores))  # masked pairs at 0

    def decay(self, lq: int, lk: int, like: Tensor) -> Tensor:
        """gamma^(i - j) for keys j <= i, 0 after i.  # (Lq, Lk)"""
        distance = (torch.arange(lq)[:, None] - torch.arange(lk)[None, :]).to(like)
        return torch.where(distance >= 0, self.gamma ** distance.clamp_min(0), 0.0)

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str) -> Tensor:
        """The recurrent form, one token at a time; a key padding mask (B, 1, 1, Lk) drops the hidden keys' terms."""
        if mask is not None and mask.shape[-2] != 1:
            raise AttnexpError("the recurrent path takes key padding masks (B, 1, 1, Lk) only")
        if mask is not None:
            k = k * mask.transpose(-2, -1).to(k.dtype)  # (B, 1, Lk, 1): hidden keys add nothing
        state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])  # (B, H, D, D)
        outs = []
        for i in range(q.shape[-2]):
            state = self.gamma * state + k[..., i, :, None] * v[..., i, None, :]
            outs.append(q[..., i, None, :] @ state)  # (B, H, 1, D)
        return torch.cat(outs, -2) * self.head_dim**-0.5


class DecayOverflows(Retention):
    """A draft for both directions: the decay gamma^(i - j) computed for every pair before the mask is applied. A key
    after its query gets gamma^-(j - i), which overflows float32 past 12 positions at gamma = 0.001: the kit's 6
    tokens pass, the 16 of the digits network give infinite weights."""

    causal_only = False
    fused_paths = ()  # the recurrent form is causal only

    def __init__(self, dim: int, gamma: float = 0.001, **options) -> None:
        super().__init__(dim, gamma, **options)

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        lq, lk = scores.shape[-2:]
        distance = (torch.arange(lq)[:, None] - torch.arange(lk)[None, :]).to(scores)
        decay = self.gamma**distance
        return torch.where(torch.isinf(scores), 0.0, scores * decay)


class SelectiveAttention(DotAttention):
    """Selective attention: head 0's logits, rectified, say how much a query masks each earlier key for the queries
    after it; F_ij = sum_(q < i) relu(s_qj) (the diagonal and the first key never masked) is subtracted from every
    head's logits. The fused path is one SDPA call with -F as its additive mask."""

    causal_only = True
    permutation_equivariant = False

    def selection(self, q: Tensor, k: Tensor) -> Tensor:
        """F, the masking each key has received from the queries before.  # (B, 1, Lq, Lk)"""
        lq, lk = q.shape[-2], k.shape[-2]
        chosen = (q[:, :1] @ k[:, :1].transpose(-2, -1)).float().relu() * self.head_dim**-0.5
        chosen = chosen * causal_mask(lq, lk).tril(-1)  # a query masks earlier keys only, itself never
        chosen[..., 0] = 0.0  # nor the first key
        return F.pad(chosen.cumsum(-2), (0, 0, 1, 0))[..., :lq, :]  # the queries before each one

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return super().score(q, k) - self.selection(q, k)

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str) -> Tensor:
        allowed = self.full_mask(mask, q, k)
        bias = self.penalty(q, k).masked_fill(~allowed, NEG)
        dropout = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), dropout_p=dropout)
        return zero_empty_rows(out, allowed)

    def penalty(self, q: Tensor, k: Tensor) -> Tensor:
        return -self.selection(q, k)


class SelectionNaN(SelectiveAttention):
    """A draft whose fused path scales the masking by each query's largest: 0/0 on the first query, which has masked
    nothing. The explicit path (the weights, the telemetry) is right; the path that trains gives NaN."""

    def penalty(self, q: Tensor, k: Tensor) -> Tensor:
        chosen = self.selection(q, k)
        return -chosen / chosen.amax(-1, keepdim=True)
