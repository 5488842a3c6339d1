"""Augmentation of whole image batches as tensor ops: random crop with padding, horizontal flip."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attnexp.rules import check


class BatchAugment:
    """Random crop after zero padding, and a random horizontal flip, for every image of a batch at once.

    Draws its random numbers on the CPU, from ``generator`` or torch's global
    generator (seeded by the run's ``seed``), so a seed fixes the result on
    any device. Padding is zero in normalised units, i.e. the mean colour.
    """

    def __init__(self, crop_padding: int = 4, flip: bool = True) -> None:
        check("data.augment", crop_padding=crop_padding)
        self.crop_padding, self.flip = crop_padding, flip

    def __call__(self, images: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """Augmented copy of ``images``.  # (B, C, H, W) -> (B, C, H, W)"""
        b, c, h, w = images.shape
        out = images
        if self.crop_padding:
            p = self.crop_padding
            padded = F.pad(images, (p, p, p, p)).flatten(2)  # (B, C, (H+2p)*(W+2p))
            dy, dx = torch.randint(0, 2 * p + 1, (2, b, 1, 1), generator=generator).to(images.device)
            rows = dy + torch.arange(h, device=images.device)[:, None]  # (B, H, 1)
            cols = dx + torch.arange(w, device=images.device)  # (B, 1, W)
            index = (rows * (w + 2 * p) + cols).flatten(1)  # (B, H*W): each output pixel's place in the padded image
            out = padded.gather(2, index[:, None, :].expand(b, c, h * w)).view(b, c, h, w)
        if self.flip:
            flipped = (torch.rand(b, generator=generator) < 0.5).to(images.device)[:, None, None, None]
            out = torch.where(flipped, out.flip(-1), out)
        return out

    def __repr__(self) -> str:
        return f"BatchAugment(crop_padding={self.crop_padding}, flip={self.flip})"
