"""The MLP baseline (``model=mlp``): one dense layer mixes the tokens, no attention."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers.contract import TokenMixer


class DenseMixer(TokenMixer):
    """The MLP baseline: one dense layer that mixes tokens, no attention.

    By default the layer acts on the whole flattened sequence, (L*C) -> (L*C):
    in the one-layer classifier this makes the classic 784-784-10 MLP on MNIST.
    With ``shared_over_channels`` it acts on the token axis only, L -> L, with
    the same weights for every channel (the token mixing of MLP-Mixer): what a
    transformer offers, where the full layer would have (L*C)^2 weights.
    It needs a fixed ``num_tokens`` and cannot be causal.
    """

    def __init__(self, dim: int, **request: Any) -> None:
        super().__init__(dim, **request)
        num_tokens, shared_over_channels = self.request.num_tokens, self.request.shared_over_channels
        if self.request.causal:
            raise AttnexpError(
                "The mlp token mixer cannot predict next tokens: it mixes every position of the window with every "
                "other, so position i would see the token it must predict. On text, sequence-to-sequence and "
                "generated next-token data pick a mixer that can be causal, e.g. model=dot or model=euclid "
                "(attnexp --help lists the mixers)."
            )
        if num_tokens is None:
            raise AttnexpError("The mlp token mixer needs a fixed number of tokens, and this network gives none.")
        self.num_tokens, self.shared_over_channels = num_tokens, shared_over_channels
        width = num_tokens if shared_over_channels else dim * num_tokens
        self.dense = nn.Linear(width, width)

    def forward(
        self, x: Tensor, context: Tensor | None = None, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        if context is not None or mask is not None:
            raise AttnexpError(
                "The mlp token mixer mixes the tokens of x with each other by fixed weights: it cannot attend "
                "to a context (cross-attention) or leave out masked tokens. Pick an attention mixer, e.g. model=dot."
            )
        if x.shape[1] != self.num_tokens:
            raise ValueError(f"the mlp mixer was built for {self.num_tokens} tokens, got {x.shape[1]}.")
        if self.shared_over_channels:
            return self.dense(x.transpose(1, 2)).transpose(1, 2), None  # (B, C, L) mixed over L
        return self.dense(x.flatten(1)).view_as(x), None  # (B, L, C)
