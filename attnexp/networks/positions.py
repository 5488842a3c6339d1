"""Positional encodings added to token embeddings."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnexp.errors import AttnexpError


class SinusoidalPositions(nn.Module):
    """Fixed sin/cos encoding of Vaswani et al.: channel 2i is sin(p / 10000^(2i/C)), 2i+1 its cos."""

    table: Tensor

    def __init__(self, length: int, dim: int) -> None:
        super().__init__()
        position = torch.arange(length, dtype=torch.float32).unsqueeze(1)  # (L, 1)
        frequency = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))  # (ceil(C/2),)
        table = torch.zeros(length, dim)
        table[:, 0::2] = torch.sin(position * frequency)
        table[:, 1::2] = torch.cos(position * frequency[: dim // 2])
        self.register_buffer("table", table, persistent=False)  # (L, C)

    def forward(self, length: int) -> Tensor:
        return self.table[:length]  # (L, C)


class LearnedPositions(nn.Module):
    """One trained vector per position."""

    def __init__(self, length: int, dim: int) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.zeros(length, dim))  # (L, C)
        nn.init.trunc_normal_(self.table, std=0.02)

    def forward(self, length: int) -> Tensor:
        return self.table[:length]  # (L, C)


class NoPositions(nn.Module):
    """No positional information: the tokens' order is left to the mixer (or lost)."""

    def __init__(self, length: int, dim: int) -> None:
        super().__init__()

    def forward(self, length: int) -> Tensor | float:
        return 0.0


POSITIONS = {"none": NoPositions, "sinusoidal": SinusoidalPositions, "learned": LearnedPositions}


def check_positions(positions: str) -> None:
    """Refuse a ``net.positions`` that is not one of :data:`POSITIONS`."""
    if positions not in POSITIONS:
        raise AttnexpError(
            f"net.positions={positions!r} is unknown. Allowed: {', '.join(POSITIONS)}; e.g. net.positions=learned."
        )
