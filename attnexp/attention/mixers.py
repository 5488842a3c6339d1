"""Token mixers that are not softmax attention but share its call signature."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class SqueezeExcitation(nn.Module):
    """Squeeze-and-excitation channel attention over a token sequence.

    Squeeze: mean over tokens (a running mean over the prefix when ``causal``,
    so no token sees later ones). Excite: bottleneck MLP with ``reduction``,
    sigmoid gate. The gates rescale every token's channels and are returned
    as the "attention weights": (B, C), or (B, L, C) when causal.
    """

    def __init__(self, dim: int, reduction: int = 4, causal: bool = False) -> None:
        super().__init__()
        if reduction < 1:
            raise ValueError(f"se reduction must be >= 1, got {reduction}.")
        hidden = max(1, dim // reduction)
        self.causal = causal
        self.excite = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, dim), nn.Sigmoid())

    def forward(
        self, x: Tensor, context: Tensor | None = None, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        if self.causal:
            counts = torch.arange(1, x.shape[1] + 1, device=x.device, dtype=x.dtype).unsqueeze(-1)
            squeezed = x.cumsum(dim=1) / counts  # (B, L, C)
            gates = self.excite(squeezed)  # (B, L, C)
            out = x * gates
        else:
            gates = self.excite(x.mean(dim=1))  # (B, C)
            out = x * gates.unsqueeze(1)
        return out, gates if need_weights else None


class DenseMixer(nn.Module):
    """The MLP baseline: one dense layer that mixes tokens, no attention.

    By default the layer acts on the whole flattened sequence, (L*C) -> (L*C):
    in the one-layer classifier this makes the classic 784-784-10 MLP on MNIST.
    With ``shared_over_channels`` it acts on the token axis only, L -> L, with
    the same weights for every channel (the token mixing of MLP-Mixer): what a
    transformer offers, where the full layer would have (L*C)^2 weights.
    """

    def __init__(self, dim: int, num_tokens: int, shared_over_channels: bool = False) -> None:
        super().__init__()
        self.num_tokens, self.shared_over_channels = num_tokens, shared_over_channels
        width = num_tokens if shared_over_channels else dim * num_tokens
        self.dense = nn.Linear(width, width)

    def forward(
        self, x: Tensor, context: Tensor | None = None, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        if x.shape[1] != self.num_tokens:
            raise ValueError(f"the mlp mixer was built for {self.num_tokens} tokens, got {x.shape[1]}.")
        if self.shared_over_channels:
            return self.dense(x.transpose(1, 2)).transpose(1, 2), None  # (B, C, L) mixed over L
        return self.dense(x.flatten(1)).view_as(x), None
