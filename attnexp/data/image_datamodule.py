"""Shared image pipeline: load once, normalise, split, cut into patches once, batch from tensors."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from attnexp.data.splits import SplitLoaders
from attnexp.errors import AttnexpError, divisors
from attnexp.rules import check


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """Cut images into non-overlapping patches in row-major order.  # (N, C, H, W) -> (N, L, C*p*p)"""
    n, c, h, w = images.shape
    p = patch_size
    patches = images.reshape(n, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)  # (N, H/p, W/p, C, p, p)
    return patches.reshape(n, (h // p) * (w // p), c * p * p)


class ImageDataModule(SplitLoaders):
    """Base for image classification data held whole in memory.

    Subclasses set ``name``, ``image_size``, ``channels``, ``num_classes`` and
    implement :meth:`load`. The validation set is carved from the training split
    with ``split_seed`` (independent of the run's seed, so every run of a
    comparison sees the same split). Batches come from :func:`tensor_loader`.
    ``augment`` (e.g. :class:`~attnexp.data.batch_augment.BatchAugment`) maps a
    batch of normalised images to augmented ones; it runs on training batches
    only, after they reach the device.
    """

    name: str
    image_size: int
    channels: int
    num_classes: int = 10

    def __init__(
        self,
        root: str = "data",
        patch_size: int | None = None,
        val_size: int = 5000,
        batch_size: int = 64,
        eval_batch_size: int = 1000,
        split_seed: int = 0,
        augment: Callable[[Tensor], Tensor] | None = None,
    ) -> None:
        super().__init__(batch_size, eval_batch_size)
        check("data", patch_size=patch_size, val_size=val_size, split_seed=split_seed)
        if patch_size is not None and self.image_size % patch_size:
            raise AttnexpError(
                f"data.patch_size={patch_size} does not divide the {self.name} image size "
                f"{self.image_size}: patches must tile the image. Allowed: {divisors(self.image_size)}."
            )
        self.root, self.patch_size, self.val_size = root, patch_size, val_size
        self.split_seed = split_seed
        self.augment = augment

    @property
    def spec(self) -> dict[str, int | None]:
        """Shape facts a network is built from."""
        return {
            "image_size": self.image_size,
            "channels": self.channels,
            "patch_size": self.patch_size,
            "num_classes": self.num_classes,
        }

    def load(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Return train images, train labels, test images, test labels: (N, C, H, W) any dtype, (N,) int."""
        raise NotImplementedError

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        train_x, train_y, test_x, test_y = self.load()
        if self.val_size >= len(train_x):
            raise AttnexpError(
                f"data.val_size={self.val_size} leaves nothing to train on: the {self.name} training "
                f"split has {len(train_x)} images. Use a val_size below {len(train_x)}."
            )
        perm = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(self.split_seed))
        val_idx, train_idx = perm[: self.val_size], perm[self.val_size :]
        raw = {
            "train": (train_x[train_idx], train_y[train_idx]),
            "val": (train_x[val_idx], train_y[val_idx]),
            "test": (test_x, test_y),
        }
        # Cut in the stored dtype (uint8 moves a quarter of float32's bytes), then one float copy, normalised in place.
        tokens = {name: self.to_tokens(x).to(torch.float32, copy=True) for name, (x, _) in raw.items()}
        by_channel = {
            name: t.unflatten(-1, (self.channels, -1)) if self.patch_size else t for name, t in tokens.items()
        }  # (N, L, C, p*p) or (N, C, H, W)
        std, mean = torch.std_mean(by_channel["train"], dim=(0, 1, 3) if self.patch_size else (0, 2, 3), keepdim=True)
        for view in by_channel.values():
            view.sub_(mean).div_(std.clamp_min(1e-6))
        self.splits = {name: (tokens[name], y.long()) for name, (_, y) in raw.items()}

    def to_tokens(self, images: Tensor) -> Tensor:
        """Images as the network sees them (contiguous): patches if ``patch_size`` is set."""
        return patchify(images, self.patch_size).contiguous() if self.patch_size else images.contiguous()

    def as_images(self, x: Tensor) -> Tensor:
        """Network inputs back to (N, C, H, W) images, for figures."""
        return unpatchify(x, self.channels, self.patch_size) if self.patch_size else x

    def on_after_batch_transfer(self, batch: tuple[Tensor, Tensor], dataloader_idx: int) -> tuple[Tensor, Tensor]:
        """Augment training batches as whole tensors, on the device (cut into patches again if the data is)."""
        if self.augment is None or self.trainer is None or not self.trainer.training:
            return batch
        x, y = batch
        return self.to_tokens(self.augment(self.as_images(x))), y


def unpatchify(tokens: Tensor, channels: int, patch_size: int) -> Tensor:
    """Inverse of :func:`patchify` for square images.  # (N, L, C*p*p) -> (N, C, H, W)"""
    n, length, _ = tokens.shape
    side, p = round(length**0.5), patch_size
    patches = tokens.reshape(n, side, side, channels, p, p).permute(0, 3, 1, 4, 2, 5)  # (N, C, H/p, p, W/p, p)
    return patches.reshape(n, channels, side * p, side * p)
