"""Encoder-decoder transformer: the mixer in the encoder's self-attention, the decoder's causal
self-attention and the decoder's cross-attention to the encoder output."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from attnexp.errors import AttnexpError, divisors
from attnexp.mixers.contract import build_mixer
from attnexp.networks.blocks import DecoderBlock, PreNormBlock
from attnexp.networks.positions import POSITIONS, check_positions
from attnexp.rules import check
from attnexp.tokens import BOS_ID, PAD_ID


class TokenSource(nn.Module):
    """Source token ids (B, S) -> embeddings + positions (B, S, C), and which tokens are real (not ``[pad]``)."""

    def __init__(self, vocab_size: int, length: int, dim: int, positions: str) -> None:
        super().__init__()
        self.num_tokens = length
        self.embed, self.positions = nn.Embedding(vocab_size, dim), POSITIONS[positions](length, dim)

    def forward(self, src: Tensor, real: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        if src.shape[1] > self.num_tokens:
            raise ValueError(
                f"the model was built for sources of at most {self.num_tokens} tokens, got {src.shape[1]}."
            )
        return self.embed(src) + self.positions(src.shape[1]), (
            src != PAD_ID
        ) if real is None else real  # (B, S, C), (B, S)


class PatchSource(nn.Module):
    """Images (B, C, H, W) -> a conv patch stem (kernel = stride = ``patch_size``, as in the ViT) -> patch
    embeddings in row-major order + positions (B, S, C); every patch is real (no padding)."""

    def __init__(self, channels: int, height: int, width: int, patch_size: int, dim: int, positions: str) -> None:
        super().__init__()
        if height % patch_size or width % patch_size:
            raise AttnexpError(
                f"data.patch_size={patch_size} does not tile the {height}x{width} images: it must divide both sides. "
                f"Allowed: {[d for d in divisors(height) if width % d == 0]}."
            )
        self.num_tokens = (height // patch_size) * (width // patch_size)
        self.grid = (height // patch_size, width // patch_size)
        self.stem = nn.Conv2d(channels, dim, kernel_size=patch_size, stride=patch_size)
        self.positions = POSITIONS[positions](self.num_tokens, dim)

    def forward(self, images: Tensor, real: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        return self.stem(images).flatten(2).transpose(1, 2) + self.positions(self.num_tokens), real  # (B, S, C)


class Seq2Seq(nn.Module):
    """Source -> ``enc_depth`` pre-norm blocks -> LayerNorm = memory; target tokens + positions ->
    ``dec_depth`` decoder blocks (causal self-attention, cross-attention to the memory, feed-forward) ->
    LayerNorm -> linear over the target vocabulary (``[pad]`` and ``[bos]`` at -inf: they never come next).

    The source is token ids (``src_vocab_size``, ``src_len``; ``[pad]`` is id 0) or images (``channels``,
    ``image_height``, ``image_width``, ``patch_size``: a conv patch stem). Every attention over the source
    gets its key padding mask, so padded source positions get exactly zero weight; the decoder's self-attention
    is causal (target padding only follows the tokens, so no real position sees it). The encoder's mixers are
    the mixer as configured (``model=masked`` reads the source left to right); the cross-attention is never
    causal. The heads are the mixer's (``model.heads``). ``tgt_len`` counts ``[bos]`` and ``[eos]``.
    """

    def __init__(
        self,
        mixer: Callable[..., nn.Module],
        tgt_vocab_size: int,
        tgt_len: int,
        src_vocab_size: int | None = None,
        src_len: int | None = None,
        channels: int | None = None,
        image_height: int | None = None,
        image_width: int | None = None,
        patch_size: int | None = None,
        dim: int = 64,
        enc_depth: int = 2,
        dec_depth: int = 2,
        mlp_ratio: float = 4.0,
        dropout: float = 0.1,
        positions: str = "sinusoidal",
    ) -> None:
        super().__init__()
        check("net", dim=dim, enc_depth=enc_depth, dec_depth=dec_depth, mlp_ratio=mlp_ratio, dropout=dropout)
        check_positions(positions)
        if src_vocab_size is not None and src_len is not None:
            self.source: nn.Module = TokenSource(src_vocab_size, src_len, dim, positions)
        elif channels is not None and image_height and image_width and patch_size:
            self.source = PatchSource(channels, image_height, image_width, patch_size, dim, positions)
        else:
            raise AttnexpError(
                "net=seq2seq needs source tokens (src_vocab_size, src_len) or images (channels, image_height, "
                "image_width, patch_size) from the data: pick a "
                "sequence-to-sequence data option (dates, pairs, captions)."
            )
        self.num_classes, self.tgt_len = tgt_vocab_size, tgt_len
        s = self.source.num_tokens
        self.encoder = nn.ModuleList(
            PreNormBlock(build_mixer(mixer, dim=dim, num_tokens=s, out_proj=True), dim, mlp_ratio, dropout)
            for _ in range(enc_depth)
        )
        self.enc_norm = nn.LayerNorm(dim)
        self.embed, self.positions = nn.Embedding(tgt_vocab_size, dim), POSITIONS[positions](tgt_len, dim)
        self.decoder = nn.ModuleList(
            DecoderBlock(
                build_mixer(mixer, dim=dim, num_tokens=tgt_len, causal=True, out_proj=True),
                build_mixer(mixer, dim=dim, num_tokens=s, causal=False, out_proj=True),
                dim,
                mlp_ratio,
                dropout,
            )
            for _ in range(dec_depth)
        )
        self.drop = nn.Dropout(dropout)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, tgt_vocab_size)
        never = torch.zeros(tgt_vocab_size, dtype=torch.bool)
        never[[PAD_ID, BOS_ID]] = True  # no token is followed by [pad] or [bos]: they are never predicted
        self.register_buffer("never", never, persistent=False)

    def encode(
        self, src: Tensor, real: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None, list[Tensor | None]]:
        """The memory (B, S, C), its key padding mask (B, 1, 1, S) or None, and each encoder block's weights.
        ``real`` (B, S) says which source tokens are real; default: those that are not ``[pad]``."""
        h, real = self.source(src, real)
        mask = None if real is None else real[:, None, None, :]  # (B, 1, 1, S)
        h, maps = self.drop(h), []
        for block in self.encoder:
            h, weights = block(h, need_weights=need_weights, mask=mask)
            maps.append(weights)
        return self.enc_norm(h), mask, maps

    def decode(
        self, tgt: Tensor, memory: Tensor, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor | None]]:
        """Next-token logits (B, T, V) for target ids (B, T), and each decoder block's self- and cross-attention
        weights."""
        h, maps = self.decoder_states(tgt, memory, mask, need_weights)
        return self.logits(h), maps

    def next_logits(self, tgt: Tensor, memory: Tensor, mask: Tensor | None) -> Tensor:
        """The logits of the token after target ids (B, T): (B, V). Decoding needs only the last position's: the
        head over a large target vocabulary at every position would be most of a decoding step's time."""
        return self.logits(self.decoder_states(tgt, memory, mask)[0][:, -1])

    def decoder_states(
        self, tgt: Tensor, memory: Tensor, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor | None]]:
        """The last decoder block's output (B, T, C) for target ids (B, T), and each block's attention weights."""
        if tgt.shape[1] > self.tgt_len:
            raise ValueError(f"the model was built for targets of at most {self.tgt_len} tokens, got {tgt.shape[1]}.")
        h, maps = self.drop(self.embed(tgt) + self.positions(tgt.shape[1])), []
        for block in self.decoder:
            h, self_weights, cross_weights = block(h, memory, mask, need_weights=need_weights)
            maps += [self_weights, cross_weights]
        return h, maps

    def logits(self, h: Tensor) -> Tensor:
        """Decoder states (..., C) -> logits over the target vocabulary (..., V), ``[pad]`` and ``[bos]`` at -inf."""
        return self.head(self.norm(h)).masked_fill(self.never, float("-inf"))

    def forward(
        self, src: Tensor, tgt: Tensor | None = None, need_weights: bool = False, real: Tensor | None = None
    ) -> Tensor | tuple[Tensor, list[Tensor | None]]:
        """Teacher-forced logits (B, T, V) for sources and target inputs (B, T) (``[bos]`` first); with
        ``need_weights`` also every mixer's weights in module order (encoder blocks, then each decoder block's
        self- and cross-attention)."""
        if tgt is None:
            raise AttnexpError(
                "net=seq2seq reads the targets too (teacher forcing): use it with task=seq2seq or task=translation, "
                "which the data=dates, pairs and captions configs pick; drop the task= override."
            )
        memory, mask, enc_maps = self.encode(src, real, need_weights)
        logits, dec_maps = self.decode(tgt, memory, mask, need_weights)
        return (logits, enc_maps + dec_maps) if need_weights else logits
