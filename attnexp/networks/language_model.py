"""Causal transformer language model: predicts every next token of a window."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers.contract import build_mixer
from attnexp.networks.blocks import PreNormBlock
from attnexp.networks.positions import POSITIONS, LearnedPositions, check_positions
from attnexp.rules import check

INITS = ("torch", "gpt2")


@torch.no_grad()
def gpt2_init(net: LanguageModel, depth: int) -> None:
    """GPT-2's initialisation: linear, embedding and learned position weights N(0, 0.02), biases 0, and the output
    layer of every residual branch N(0, 0.02 / sqrt(2 depth)) so the residual stream's variance does not grow with
    depth."""
    for module in net.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, 0.0, 0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, LearnedPositions):
            nn.init.normal_(module.table, 0.0, 0.02)
    for block in net.blocks:
        ff = getattr(block, "ff", None)
        residual = [getattr(block.mixer, "out_proj", None), ff[3] if ff is not None else None]
        for layer in residual:
            if isinstance(layer, nn.Linear):
                nn.init.normal_(layer.weight, 0.0, 0.02 / math.sqrt(2 * depth))


class LanguageModel(nn.Module):
    """Token embedding + positions -> ``depth`` pre-norm causal blocks -> LayerNorm -> linear over the vocabulary.

    Every mixer is asked to be causal (``causal=True``), so the logits at position i depend on tokens <= i only; a
    mixer that cannot be refuses. ``dropout`` applies to the embeddings, each residual branch and the feed-forward
    layers; ``embed_dropout``, if set, to the embeddings instead (Zoology drops out the embeddings only).
    ``positions`` is ``sinusoidal`` (fixed), ``learned`` or ``none``. ``num_classes`` is the vocabulary size.
    ``bias=False`` leaves the biases out of the LayerNorms, the feed-forward layers and the head (the mixer's
    projections follow ``model.bias``); ``tied_embeddings`` makes the head's weight the token embedding's (as GPT-2
    and nanoGPT do). ``init=gpt2`` draws every linear and embedding weight from N(0, 0.02) and the last layer of
    each residual branch (the mixer's output projection, the feed-forward's second layer) from N(0, 0.02 / sqrt(2
    depth)), biases zero, as GPT-2 does; ``torch`` keeps torch's defaults (an embedding N(0, 1)), which a tied head
    cannot start from.
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
        bias: bool = True,
        tied_embeddings: bool = False,
        init: str = "torch",
        embed_dropout: float | None = None,
    ) -> None:
        super().__init__()
        check("net", dim=dim, depth=depth, mlp_ratio=mlp_ratio, dropout=dropout, embed_dropout=embed_dropout)
        check_positions(positions)
        self.num_classes, self.context = vocab_size, context
        self.embed = nn.Embedding(vocab_size, dim)
        self.positions = POSITIONS[positions](context, dim)
        self.drop = nn.Dropout(dropout if embed_dropout is None else embed_dropout)
        causal = {} if self.causal is None else {"causal": self.causal}
        mixers = [
            build_mixer(mixer, dim=dim, num_tokens=context, out_proj=attn_out_proj, **causal) for _ in range(depth)
        ]
        self.blocks = nn.ModuleList(PreNormBlock(m, dim, mlp_ratio, dropout, bias) for m in mixers)
        self.norm = nn.LayerNorm(dim, bias=bias)
        self.head = nn.Linear(dim, vocab_size, bias=bias)
        if tied_embeddings:
            self.head.weight = self.embed.weight  # one (V, C) tensor: trained, decayed and counted once
        if init not in INITS:
            raise AttnexpError(f"net.init={init!r} is unknown. Allowed: {', '.join(INITS)}; e.g. net.init=gpt2.")
        if init == "gpt2":
            gpt2_init(self, depth)

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

    def forward(
        self, x: Tensor, need_weights: bool = False, at: Tensor | None = None
    ) -> Tensor | tuple[Tensor, list[Tensor | None]]:
        """Next-token logits (B, L, V) for token ids (B, L); with ``need_weights`` also each block's weights.
        ``at`` (B, A) picks the positions to predict (B, A, V): the head over a large vocabulary is most of the work."""
        h, maps = self.encode(x, need_weights)
        if at is not None:
            h = h.gather(1, at.unsqueeze(-1).expand(-1, -1, h.shape[-1]))  # (B, A, C)
        logits = self.head(h)  # (B, L, V)
        return (logits, maps) if need_weights else logits


def next_token_probs(net: Any, ids: Tensor) -> Tensor:
    """Probabilities of the token after ``ids`` (the last ``net.context`` of them).  # (L,) -> (V,)"""
    with torch.no_grad():
        return net(ids[-net.context :].unsqueeze(0))[0, -1].softmax(-1)


def continue_ids(net: Any, ids: Tensor, tokens: int, sample: bool, temperature: float, seed: int) -> Tensor:
    """``tokens`` more ids after ``ids``: the most likely each time, or drawn at ``temperature``.  # (L,) -> (L+n,)"""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(tokens):
        probs = next_token_probs(net, ids)
        if sample:
            probs = (probs.log() / temperature).softmax(-1)
            nxt = torch.multinomial(probs, 1, generator=generator)
        else:
            nxt = probs.argmax().view(1)
        ids = torch.cat([ids, nxt])
    return ids
