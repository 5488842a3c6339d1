"""Causal transformer language model: predicts every next token of a window."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from attnexp.mixers.contract import build_mixer
from attnexp.networks.blocks import PreNormBlock
from attnexp.networks.positions import POSITIONS, check_positions
from attnexp.rules import check


class LanguageModel(nn.Module):
    """Token embedding + positions -> ``depth`` pre-norm causal blocks -> LayerNorm -> linear over the vocabulary.

    Every mixer is asked to be causal (``causal=True``), so the logits at
    position i depend on tokens <= i only; a mixer that cannot be refuses.
    ``positions`` is ``sinusoidal`` (fixed), ``learned`` or ``none``. ``num_classes`` is
    the vocabulary size.
    """

    causal: bool | None = True  # what every mixer is asked to be; None: the mixer's own setting

    def __init__(
        self,
        mixer: Callable[..., nn.Module],
        vocab_size: int,
        context: int,
        dim: int = 64,
        depth: int = 2,
        mlp_ratio: float = 4.0,
        dropout: float = 0.1,
        positions: str = "sinusoidal",
        attn_out_proj: bool = True,
    ) -> None:
        super().__init__()
        check("net", dim=dim, depth=depth, mlp_ratio=mlp_ratio, dropout=dropout)
        check_positions(positions)
        self.num_classes, self.context = vocab_size, context
        self.embed = nn.Embedding(vocab_size, dim)
        self.positions = POSITIONS[positions](context, dim)
        self.drop = nn.Dropout(dropout)
        causal = {} if self.causal is None else {"causal": self.causal}
        mixers = [build_mixer(mixer, dim=dim, num_tokens=context, out_proj=attn_out_proj, **causal) for _ in range(depth)]
        self.blocks = nn.ModuleList(PreNormBlock(m, dim, mlp_ratio, dropout) for m in mixers)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab_size)

    def encode(self, x: Tensor, need_weights: bool = False) -> tuple[Tensor, list[Tensor | None]]:
        """The normalised output of the last block (B, L, C) for token ids (B, L), and each block's weights."""
        if x.shape[1] > self.context:
            raise ValueError(f"the model was built for windows of at most {self.context} tokens, got {x.shape[1]}.")
        h = self.drop(self.embed(x) + self.positions(x.shape[1]))  # (B, L, C)
        maps = []
        for block in self.blocks:
            h, weights = block(h, need_weights=need_weights)
            maps.append(weights)
        return self.norm(h), maps

    def forward(self, x: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, list[Tensor | None]]:
        """Next-token logits (B, L, V) for token ids (B, L); with ``need_weights`` also each block's weights."""
        h, maps = self.encode(x, need_weights)
        logits = self.head(h)  # (B, L, V)
        return (logits, maps) if need_weights else logits
