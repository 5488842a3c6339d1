"""Causal transformer language model: predicts every next token of a window."""

from __future__ import annotations

import inspect
from typing import Callable

from torch import Tensor, nn

from attnexp.attention import build_mixer
from attnexp.errors import AttnexpError
from attnexp.models.blocks import PreNormBlock
from attnexp.models.positions import POSITIONS


def causal_mixer(factory: Callable[..., nn.Module], dim: int, out_proj: bool) -> nn.Module:
    """Build the mixer with ``causal=True``; refuse one that would see later tokens."""
    name = getattr(getattr(factory, "func", factory), "__name__", str(factory))
    mixer = None
    if "num_tokens" not in inspect.signature(factory).parameters:  # a dense layer over the whole window never is
        mixer = build_mixer(factory, dim, causal=True, out_proj=out_proj)
    if not getattr(mixer, "causal", False):
        raise AttnexpError(
            f"The {name} token mixer cannot predict next tokens: it mixes every position of the window with every "
            "other, so position i would see the token it must predict (model=mlp is such a mixer). On text data "
            "use model=dot, euclid, masked or se; each runs causal here (se squeezes with a running mean)."
        )
    return mixer


class LanguageModel(nn.Module):
    """Token embedding + positions -> ``depth`` pre-norm causal blocks -> LayerNorm -> linear over the vocabulary.

    Every variant is made causal (``causal=True`` is offered to the mixer), so
    the logits at position i depend on tokens <= i only. ``positions`` is
    ``sinusoidal`` (fixed) or ``learned``. ``num_classes`` is the vocabulary size.
    """

    is_language_model = True  # the module logs perplexity for it

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
        if positions not in POSITIONS:
            raise AttnexpError(
                f"net.positions={positions!r} is unknown. Allowed: {', '.join(POSITIONS)}; e.g. net.positions=learned."
            )
        self.num_classes, self.context = vocab_size, context
        self.embed = nn.Embedding(vocab_size, dim)
        self.positions = POSITIONS[positions](context, dim)
        self.drop = nn.Dropout(dropout)
        mixers = [causal_mixer(mixer, dim, attn_out_proj) for _ in range(depth)]
        self.blocks = nn.ModuleList(PreNormBlock(m, dim, mlp_ratio, dropout) for m in mixers)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab_size)

    def forward(self, x: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, list[Tensor | None]]:
        """Next-token logits (B, L, V) for token ids (B, L); with ``need_weights`` also each block's weights."""
        if x.shape[1] > self.context:
            raise ValueError(f"the model was built for windows of at most {self.context} tokens, got {x.shape[1]}.")
        h = self.drop(self.embed(x) + self.positions(x.shape[1]))  # (B, L, C)
        maps = []
        for block in self.blocks:
            h, weights = block(h, need_weights=need_weights)
            maps.append(weights)
        logits = self.head(self.norm(h))  # (B, L, V)
        return (logits, maps) if need_weights else logits
