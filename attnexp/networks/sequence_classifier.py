"""Transformer encoder over token ids with mean pooling: one label per sequence (ListOps)."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from attnexp.networks.language_model import LanguageModel


class SequenceClassifier(LanguageModel):
    """The language model's blocks without the causal mask (unless the mixer has one, as ``model=masked``),
    then the mean of the outputs over the non-padding tokens (id ``pad_id``) and a linear layer to
    ``num_classes`` logits. Attention still sees padding: padding only ever follows the tokens, so a
    causal mixer never does."""

    causal = None

    def __init__(
        self,
        mixer: Callable[..., nn.Module],
        vocab_size: int,
        context: int,
        num_classes: int,
        dim: int = 64,
        depth: int = 2,
        mlp_ratio: float = 4.0,
        dropout: float = 0.0,
        positions: str = "sinusoidal",
        attn_out_proj: bool = True,
        pad_id: int = 0,
    ) -> None:
        super().__init__(mixer, vocab_size, context, dim, depth, mlp_ratio, dropout, positions, attn_out_proj)
        self.num_classes, self.pad_id = num_classes, pad_id
        self.head = nn.Linear(self.head.in_features, num_classes)

    def forward(  # type: ignore[override]  # one label per sequence: no positions to pick (``at``)
        self, x: Tensor, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor | None]]:
        """Logits (B, classes) for token ids (B, L); with ``need_weights`` also each block's weights."""
        h, maps = self.encode(x, need_weights)  # (B, L, C)
        keep = (x != self.pad_id).unsqueeze(-1).to(h.dtype)  # (B, L, 1)
        logits = self.head((h * keep).sum(1) / keep.sum(1).clamp_min(1))  # (B, classes)
        return (logits, maps) if need_weights else logits
