"""Classifier over image patch tokens: the classic one-layer attention model and its deeper versions."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers.contract import build_mixer
from attnexp.networks.blocks import PreNormBlock
from attnexp.networks.positions import POSITIONS, check_positions
from attnexp.rules import check


class PatchClassifier(nn.Module):
    """Patch tokens -> [input projection] -> [positions] -> mixer layers -> ReLU -> linear.

    With the defaults (``depth=1``, ``dim=None``, ``prenorm=False``) this is the
    classic one-layer model: one attention layer on the raw patches, ReLU, and a
    linear layer over the flattened tokens. ``prenorm=True`` stacks pre-norm
    residual blocks with a feed-forward layer instead.
    """

    def __init__(
        self,
        mixer: Callable[..., nn.Module],
        image_size: int,
        channels: int,
        patch_size: int,
        num_classes: int,
        dim: int | None = None,
        depth: int = 1,
        prenorm: bool = False,
        mlp_ratio: float = 2.0,
        dropout: float = 0.0,
        positions: str = "none",
        attn_out_proj: bool = False,
    ) -> None:
        super().__init__()
        check("net", dim=dim, depth=depth, mlp_ratio=mlp_ratio, dropout=dropout)
        check_positions(positions)
        if patch_size is None:
            raise AttnexpError(
                "net=patch needs patch tokens, and the data hands over whole images: set data.patch_size."
            )
        self.num_tokens = (image_size // patch_size) ** 2
        token_dim = channels * patch_size**2
        dim = dim or token_dim
        self.num_classes = num_classes
        self.proj = nn.Linear(token_dim, dim) if dim != token_dim else nn.Identity()
        self.positions = POSITIONS[positions](self.num_tokens, dim) if positions != "none" else None
        mixers = [build_mixer(mixer, dim=dim, num_tokens=self.num_tokens, out_proj=attn_out_proj) for _ in range(depth)]
        self.layers = (
            nn.ModuleList(PreNormBlock(m, dim, mlp_ratio, dropout) for m in mixers)
            if prenorm
            else nn.ModuleList(mixers)
        )
        self.head = nn.Sequential(
            nn.ReLU(), nn.Flatten(1), nn.Dropout(dropout), nn.Linear(self.num_tokens * dim, num_classes)
        )

    def forward(self, x: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, list[Tensor | None]]:
        """Logits (B, classes) for tokens (B, L, P); with ``need_weights`` also each layer's weights."""
        x = self.proj(x)  # (B, L, C)
        if self.positions is not None:
            x = x + self.positions(x.shape[1])
        maps = []
        for layer in self.layers:
            x, weights = layer(x, need_weights=need_weights)
            maps.append(weights)
        logits = self.head(x)
        return (logits, maps) if need_weights else logits
