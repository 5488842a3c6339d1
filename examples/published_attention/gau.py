"""The gated attention unit's token mixing (Hua, Dai, Liu and Le 2022, "Transformer Quality in Linear Time", ICML,
arXiv:2202.10447; their Code 1), without its relative position bias (attnexp's networks add positions).

One head. A shared projection z = silu(x W_z) of width ``shared`` gives queries and keys by a per-channel scale and
offset each; the weights are squared ReLUs of the scores over the number of keys n a row sees (the length; under a
causal mask the position, as in lucidrains' FLASH-pytorch), and a gate u = silu(x W_u) multiplies what they gather
from v = silu(x W_v), both ``expansion`` times as wide as x:

    A = relu(q k^T / n)^2,    out = (u * (A v)) W_o.

Its weights are non-negative and need not sum to 1 (``weight_kind = "non-negative"``): a row may gather much or
nothing. It is written against the call contract alone (no attnexp base class but :class:`TokenMixer`), with the
package's masking helper.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers import NON_NEGATIVE, TokenMixer, attention_weights, causal_mask, check_inputs


def relu_squared(scores: Tensor, mask: Tensor | None) -> Tensor:
    """relu(s)^2, masked scores (-inf) at 0.  # (B, 1, Lq, Lk)"""
    return F.relu(scores).square()


class GatedAttentionUnit(TokenMixer):
    """GAU's token mixing: one head, relu(q k^T / n)^2 over a shared projection, gated. ``expansion`` sets the width of
    u and v (the paper: 2), ``shared`` the width of z (the paper: 128); the scales start at 1 and the offsets at 0.
    Its output projection W_o maps the expanded width back and is part of the unit, so it is kept when the network
    asks for no output projection."""

    weight_kind = NON_NEGATIVE
    permutation_equivariant = True

    def __init__(
        self,
        dim: int,
        *,
        expansion: int = 2,
        shared: int = 128,
        dropout: float = 0.0,
        bias: bool = True,
        **request: Any,
    ) -> None:
        super().__init__(dim, **request)
        if self.request.heads != 1:
            raise AttnexpError(
                f"the gated attention unit attends with one head (its gate does what more heads would), got "
                f"heads={self.request.heads}. Set model.heads=1."
            )
        if not 0.0 <= dropout < 1.0:
            raise AttnexpError(f"model.dropout={dropout} is not a probability below 1.")
        self.heads, self.causal, self.dropout = 1, self.request.causal, dropout
        self.to_u, self.to_v = nn.Linear(dim, expansion * dim, bias=bias), nn.Linear(dim, expansion * dim, bias=bias)
        self.to_z = nn.Linear(dim, shared, bias=bias)
        self.scale = nn.Parameter(torch.ones(2, shared))  # queries and keys from z: z * scale + offset
        self.offset = nn.Parameter(torch.zeros(2, shared))
        self.out = nn.Linear(expansion * dim, dim, bias=bias)
        self.hook_scores = nn.Identity()  # the scores pass through it, so the telemetry logs their range

    def forward(
        self, x: Tensor, context: Tensor | None = None, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Mix ``x`` (B, Lq, C), gathering from ``context`` (B, Lk, C; default ``x``); weights (B, 1, Lq, Lk)."""
        context = x if context is None else context
        check_inputs(x, context, mask)
        u, v = F.silu(self.to_u(x)), F.silu(self.to_v(context))  # (B, Lq, E), (B, Lk, E)
        q = F.silu(self.to_z(x)) * self.scale[0] + self.offset[0]  # (B, Lq, S)
        k = F.silu(self.to_z(context)) * self.scale[1] + self.offset[1]  # (B, Lk, S)
        if self.causal:
            tri = causal_mask(x.shape[1], context.shape[1], x.device)
            mask = tri if mask is None else mask & tri
        seen = k.shape[1] if mask is None else mask.sum(-1, keepdim=True).clamp_min(1)  # n: the keys each row sees
        scores = self.hook_scores((q.float() @ k.float().transpose(-2, -1)).unsqueeze(1) / seen)  # (B, 1, Lq, Lk)
        weights = attention_weights(scores, mask, relu_squared).to(v.dtype)
        dropped = F.dropout(weights, self.dropout, training=self.training and self.dropout > 0)
        out = self.out(u * (dropped @ v.unsqueeze(1)).squeeze(1))  # (B, Lq, C)
        return out, weights if need_weights else None
