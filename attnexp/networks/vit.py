"""Vision Transformer with a pluggable token mixer (the mixer from ``model=``)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnexp.errors import AttnexpError, divisors
from attnexp.mixers.contract import build_mixer
from attnexp.networks.blocks import PreNormBlock
from attnexp.networks.positions import POSITIONS, check_positions
from attnexp.rules import check

POOLS = ("cls", "mean")


class VisionTransformer(nn.Module):
    """Conv patch stem -> [class token] + positions (learned by default) -> ``depth`` pre-norm blocks -> LayerNorm
    -> linear.

    The stem is a convolution with kernel = stride = patch size (channels -> ``dim``).
    It takes whole images (B, C, H, W), or images the data already cut into
    patches (B, L, C*p*p), which get the same weights as a linear map: the
    same operation, done where the cut was made. The patch size is the data's
    ``patch_size`` when it cuts patches, else ``patch``.

    The class token is appended after the patches, so under a causal mask
    (``model=masked``) it still sees every patch; for the other mixers its
    place makes no difference. The heads are the mixer's (``model.heads``).
    """

    def __init__(
        self,
        mixer: Callable[..., nn.Module],
        image_size: int,
        channels: int,
        patch_size: int | None,
        num_classes: int,
        patch: int | None = None,
        dim: int = 64,
        depth: int = 4,
        mlp_ratio: float = 2.0,
        dropout: float = 0.0,
        pool: str = "cls",
        positions: str = "learned",
    ) -> None:
        super().__init__()
        check("net", dim=dim, depth=depth, mlp_ratio=mlp_ratio, dropout=dropout)
        check_positions(positions)
        self.patch = check_patch(image_size, patch_size, patch)
        if pool not in POOLS:
            raise AttnexpError(f"net.pool={pool!r} is not a pooling of the ViT. Allowed: {list(POOLS)}.")
        self.num_classes, self.pool = num_classes, pool
        self.num_patches = (image_size // self.patch) ** 2
        num_tokens = self.num_patches + (pool == "cls")
        self.stem = nn.Conv2d(channels, dim, kernel_size=self.patch, stride=self.patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim)) if pool == "cls" else None
        self.positions = POSITIONS[positions](num_tokens, dim)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            PreNormBlock(
                build_mixer(mixer, dim=dim, num_tokens=num_tokens, out_proj=True, shared_over_channels=True),
                dim,
                mlp_ratio,
                dropout,
            )
            for _ in range(depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def embed(self, x: Tensor) -> Tensor:
        """Patch embeddings of images (B, C, H, W) or of pre-cut patches (B, L, C*p*p).  # (B, L, D)"""
        if x.dim() == 4:
            return self.stem(x).flatten(2).transpose(1, 2)  # (B, D, H/p, W/p) -> (B, L, D)
        return F.linear(x, self.stem.weight.flatten(1), self.stem.bias)

    def forward(self, x: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, list[Tensor | None]]:
        """Logits (B, classes); with ``need_weights`` also each block's attention weights."""
        x = self.embed(x)  # (B, L, D)
        if self.cls is not None:
            x = torch.cat([x, self.cls.expand(len(x), -1, -1)], dim=1)  # (B, L+1, D)
        x = self.drop(x + self.positions(x.shape[1]))
        maps = []
        for block in self.blocks:
            x, weights = block(x, need_weights=need_weights)
            maps.append(weights)
        x = self.norm(x)
        logits = self.head(x[:, -1] if self.cls is not None else x.mean(dim=1))  # (B, classes)
        return (logits, maps) if need_weights else logits


def check_patch(image_size: int, patch_size: int | None, patch: int | None) -> int:
    """The stem's patch size, or a clear error when it is missing, ambiguous or does not tile the image."""
    if patch_size is not None and patch is not None and patch != patch_size:
        raise AttnexpError(
            f"The data already cuts {patch_size}x{patch_size} patches (data.patch_size={patch_size}) but "
            f"net.patch={patch}. Set net.patch=null to embed the data's patches, or data.patch_size=null "
            f"to hand the ViT whole images for its {patch}x{patch} conv stem."
        )
    p = patch_size if patch_size is not None else patch
    if p is None:
        raise AttnexpError(
            "The ViT needs a patch size: the data hands over whole images (data.patch_size=null) and "
            "net.patch is null. Set net.patch=4 (for example) or data.patch_size."
        )
    if p < 1 or image_size % p:
        raise AttnexpError(
            f"net.patch={p} does not divide the image size {image_size}: the conv stem's patches must "
            f"tile the image. Allowed: {divisors(image_size)}."
        )
    return p
