"""Stick-breaking attention (Tan, Yang, Courville, Panda and Shen 2024, "Scaling Stick-Breaking Attention: An
Efficient Implementation and In-depth Study", ICLR 2025, arXiv:2410.17980).

Each query breaks a stick of length 1, starting from the nearest earlier key and going back: key j takes the share
beta_ij = sigmoid(q_i . k_j / sqrt(d)) of what the nearer keys left,

    A_ij = beta_ij prod_{j < l < i} (1 - beta_il)    (j < i),

computed in log space, log A_ij = logsigmoid(z_ij) + sum_{j < l < i} logsigmoid(-z_il), as the authors do. What the
stick keeps, 1 - sum_j A_ij, goes to the query's own token, as the authors' layers add it (their kernel returns it
beside the output as ``rem``, and their attention adds ``rem * v_i``): a row sums to 1 wherever the query's own token
is visible. A hidden key takes no share and breaks nothing, and a hidden query's remainder goes nowhere, so a
padded query's row sums to less: the kind is ``"non-negative"``. The order of the keys is the mechanism (no position
embedding is needed; ``permutation_equivariant = False``), and it is defined for causal attention only
(``causal_only = True``: the kit checks it under causal masks, and a network that asks for it non-causal is
refused). ``attend_current``: whether a query's own key takes the first share before the earlier ones (the
authors' kernel offers both; off by default, as there).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from attnexp.mixers import NON_NEGATIVE, MultiHeadAttention


class StickBreakingAttention(MultiHeadAttention):
    """Stick-breaking over ``heads`` heads: sigmoid break points from q . k / sqrt(d), nearest key first. The formula
    is its only path (the weights are a product along each row, which no SDPA call computes)."""

    weight_kind = NON_NEGATIVE  # rows sum to at most 1: the stick not broken off goes nowhere
    permutation_equivariant = False  # the order of the keys decides their shares
    causal_only = True

    def __init__(self, dim: int, *, attend_current: bool = False, **options: Any) -> None:
        super().__init__(dim, **options)
        self.attend_current = attend_current

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ k.transpose(-2, -1)) * self.head_dim**-0.5  # (B, H, Lq, Lk): z, the break points' logits

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        """A_ij from the logits, hidden keys (at -inf) taking nothing and breaking nothing, and the rest of the stick
        on the query's own token where it may see it.  # (B, H, Lq, Lk)"""
        lq, lk = scores.shape[-2:]
        own = torch.eye(lq, lk, dtype=torch.bool, device=scores.device)  # a query's own key
        breaks = scores
        if not self.attend_current:  # a query's own key and later ones take no share of the stick
            earlier = torch.ones(lq, lk, dtype=torch.bool, device=scores.device).tril(-1)
            breaks = scores.masked_fill(~earlier, float("-inf"))
        taken = F.logsigmoid(breaks)  # log beta_ij; -inf for a hidden key
        kept = F.logsigmoid(-breaks)  # log (1 - beta_ij); 0 for a hidden key
        nearer = kept.flip(-1).cumsum(-1).flip(-1) - kept  # sum over l > j of log (1 - beta_il)
        shares = torch.exp(taken + nearer)
        rest = (1.0 - shares.sum(-1, keepdim=True)).clamp_min(0.0)  # what the stick kept
        return shares + rest * (own & torch.isfinite(scores))
