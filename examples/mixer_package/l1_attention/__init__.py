"""L1 attention: softmax(-||q - k||_1 / sqrt(d)) v, a mixer shipped as an installable package.

The package names its config package under the entry-point group ``attnexp.configs`` (see pyproject.toml): once
installed, ``attnexp model=l1`` works from any folder and ``attnexp --help`` lists it.
"""

from __future__ import annotations

from torch import Tensor

from attnexp.mixers import MultiHeadAttention


class L1Attention(MultiHeadAttention):
    """Negative Manhattan distance as the score; the softmax, masks and dropout are MultiHeadAttention's."""

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return -(q.unsqueeze(-2) - k.unsqueeze(-3)).abs().sum(-1) * self.head_dim**-0.5  # (B, H, Lq, Lk)
