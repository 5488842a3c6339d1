"""Transformer building blocks shared by the networks."""

from __future__ import annotations

from torch import Tensor, nn


class FeedForward(nn.Sequential):
    """Token-wise MLP: Linear -> GELU -> Dropout -> Linear -> Dropout."""

    def __init__(self, dim: int, hidden: int, dropout: float = 0.0) -> None:
        super().__init__(nn.Linear(dim, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, dim), nn.Dropout(dropout))


class PreNormBlock(nn.Module):
    """x + mixer(LN(x)), then x + FF(LN(x)); returns (x, attention weights or None)."""

    def __init__(self, mixer: nn.Module, dim: int, mlp_ratio: float = 2.0, dropout: float = 0.0) -> None:
        super().__init__()
        self.norm1, self.mixer, self.drop = nn.LayerNorm(dim), mixer, nn.Dropout(dropout)
        self.norm2, self.ff = nn.LayerNorm(dim), FeedForward(dim, int(dim * mlp_ratio), dropout)

    def forward(self, x: Tensor, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        mixed, weights = self.mixer(self.norm1(x), need_weights=need_weights)
        x = x + self.drop(mixed)
        return x + self.ff(self.norm2(x)), weights
