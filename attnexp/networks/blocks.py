"""Transformer building blocks shared by the networks."""

from __future__ import annotations

from torch import Tensor, nn


class FeedForward(nn.Sequential):
    """Token-wise MLP: Linear -> GELU -> Dropout -> Linear -> Dropout."""

    def __init__(self, dim: int, hidden: int, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__(
            nn.Linear(dim, hidden, bias=bias),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, dim, bias=bias),
            nn.Dropout(dropout),
        )


class PreNormBlock(nn.Module):
    """x + mixer(LN(x)), then x + FF(LN(x)) (no feed-forward when ``mlp_ratio`` is 0); returns (x, attention weights
    or None). ``mask``: the mixer's (boolean, True = may attend; e.g. a key padding mask (B, 1, 1, L)). ``bias``:
    biases in the LayerNorms and the feed-forward layers."""

    def __init__(
        self, mixer: nn.Module, dim: int, mlp_ratio: float = 2.0, dropout: float = 0.0, bias: bool = True
    ) -> None:
        super().__init__()
        self.norm1, self.mixer, self.drop = nn.LayerNorm(dim, bias=bias), mixer, nn.Dropout(dropout)
        hidden = int(dim * mlp_ratio)
        self.norm2 = nn.LayerNorm(dim, bias=bias) if hidden else None
        self.ff = FeedForward(dim, hidden, dropout, bias) if hidden else None

    def forward(
        self, x: Tensor, need_weights: bool = False, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        mixed, weights = self.mixer(self.norm1(x), mask=mask, need_weights=need_weights)
        x = x + self.drop(mixed)
        if self.ff is not None and self.norm2 is not None:
            x = x + self.ff(self.norm2(x))
        return x, weights


class DecoderBlock(nn.Module):
    """A pre-norm decoder block: x + self(LN(x)) (the mixer asked to be causal), x + cross(LN(x), memory),
    then x + FF(LN(x)); returns (x, self-attention weights, cross-attention weights)."""

    def __init__(
        self, self_mixer: nn.Module, cross_mixer: nn.Module, dim: int, mlp_ratio: float = 4.0, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.norm1, self.self_mixer = nn.LayerNorm(dim), self_mixer
        self.norm2, self.cross_mixer = nn.LayerNorm(dim), cross_mixer
        hidden = int(dim * mlp_ratio)
        self.norm3 = nn.LayerNorm(dim) if hidden else None
        self.ff = FeedForward(dim, hidden, dropout) if hidden else None
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, memory: Tensor, memory_mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """``x`` (B, T, C) target tokens, ``memory`` (B, S, C) the encoder's output, ``memory_mask`` (B, 1, 1, S)
        or None."""
        mixed, self_weights = self.self_mixer(self.norm1(x), need_weights=need_weights)
        x = x + self.drop(mixed)
        mixed, cross_weights = self.cross_mixer(
            self.norm2(x), context=memory, mask=memory_mask, need_weights=need_weights
        )
        x = x + self.drop(mixed)
        if self.ff is not None and self.norm3 is not None:
            x = x + self.ff(self.norm3(x))
        return x, self_weights, cross_weights
