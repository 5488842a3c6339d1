"""Captioning images of several handwritten digits side by side: "7 3" is captioned "seven three"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from attnexp.data.seq2seq import Seq2SeqDataModule
from attnexp.data.splits import SPLITS, DealtSplits
from attnexp.errors import AttnexpError
from attnexp.rules import check
from attnexp.tokens import BOS_ID, EOS_ID, PAD_ID, SEQ2SEQ_SPECIALS

WORDS = {
    "en": ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
    "es": ("cero", "uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve"),
}
SCALE = {"mnist": 255.0, "digits": 16.0}  # the largest pixel value of each image source
PATCH = {"mnist": 7, "digits": 4}  # the default patch side: 4x4 patches per 28x28 digit, 2x2 per 8x8 digit
DIGITS_TEST_SIZE = 360  # the bundled digits have no test split: this many are held out (as in data=digits)


def canvases(
    images: Tensor, labels: Tensor, n: int, max_digits: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """``n`` canvases of 1 to ``max_digits`` images drawn from ``images`` (P, 1, H, W), side by side from the left,
    blank after; and their digits, -1 where a slot is blank.  # (n, 1, H, max_digits * W), (n, max_digits)"""
    count = torch.randint(1, max_digits + 1, (n, 1), generator=generator)
    pick = torch.randint(len(images), (n, max_digits), generator=generator)
    present = torch.arange(max_digits) < count  # (n, D)
    tiles = images[pick] * present[..., None, None, None]  # (n, D, 1, H, W)
    x = tiles.permute(0, 2, 3, 1, 4).flatten(3)  # (n, 1, H, D * W)
    return x, labels[pick].masked_fill(~present, -1)


class CaptionsDataModule(Seq2SeqDataModule, DealtSplits):
    """Canvases of 1 to ``max_digits`` digit images side by side (``images=mnist`` or the bundled 8x8
    ``digits``), each captioned by its digits as words in ``language`` (``en``: "seven three"; ``es``:
    "siete tres"). The images are pooled by split first: test canvases come from the test images only,
    validation canvases from ``val_fraction`` of the training images held out with ``split_seed``, training
    canvases from the rest, so no image of a val or test canvas was trained on. The canvases are generated
    once from ``split_seed`` as whole tensors, normalised with the training canvases' mean and std; the
    network cuts them into ``patch_size`` patches (default: 7 pixels for MNIST, 4 for the 8x8 digits).
    """

    def __init__(
        self,
        images: str = "mnist",
        language: str = "en",
        max_digits: int = 3,
        val_fraction: float = 0.1,
        patch_size: int | None = None,
        root: str = "data",
        download: bool = True,
        **splits: Any,
    ) -> None:
        super().__init__(**splits)
        check("data", max_digits=max_digits, patch_size=patch_size)
        for key, value, allowed in (("images", images, SCALE), ("language", language, WORDS)):
            if value not in allowed:
                raise AttnexpError(
                    f"data.{key}={value!r} is not an option of data=captions. Allowed: {', '.join(allowed)}."
                )
        if not 0 < val_fraction < 1:
            raise AttnexpError(
                f"data.val_fraction={val_fraction} must be between 0 and 1 (the share of training images "
                "kept for validation), e.g. 0.1."
            )
        self.images, self.language, self.max_digits = images, language, max_digits
        self.val_fraction, self.patch_size, self.root, self.download = val_fraction, patch_size, root, download
        self.stats: dict[str, float] = {}

    def prepare_data(self) -> None:
        """MNIST's files in place (downloaded where allowed) for images=mnist."""
        if self.images == "mnist":
            from attnexp.data.mnist import MNISTDataModule

            MNISTDataModule(root=self.root, download=self.download).prepare_data()

    def files(self) -> dict[str, Path]:
        """The files a run reads (MNIST's, for images=mnist), named under the data root (a run's data identity)."""
        from attnexp.data.mnist import MNISTDataModule

        return MNISTDataModule(root=self.root).files() if self.images == "mnist" else {}

    def load(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Training images and labels, test images and labels: (N, 1, H, W) in [0, 1], (N,)."""
        from attnexp.data.digits import DigitsDataModule
        from attnexp.data.mnist import MNISTDataModule

        source = (
            MNISTDataModule(root=self.root, download=self.download)
            if self.images == "mnist"
            else DigitsDataModule(test_size=DIGITS_TEST_SIZE, split_seed=self.split_seed)
        )
        train_x, train_y, test_x, test_y = source.load()
        return train_x.float() / SCALE[self.images], train_y.long(), test_x.float() / SCALE[self.images], test_y.long()

    def pools(self) -> dict[str, tuple[Tensor, Tensor]]:
        """The images each split's canvases are made of."""
        train_x, train_y, test_x, test_y = self.load()
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(self.split_seed))
        val = order[: max(1, int(len(train_x) * self.val_fraction))]
        train = order[len(val) :]
        self.pool_index = {"train": train, "val": val}  # indices into the training images, for tests
        return {
            "train": (train_x[train], train_y[train]),
            "val": (train_x[val], train_y[val]),
            "test": (test_x, test_y),
        }

    def build(self) -> None:
        pools = self.pools()
        self.patch_size = self.patch_size or PATCH[self.images]
        self.tgt_vocab = self.vocabulary("tgt_vocab", [], "word", (*SEQ2SEQ_SPECIALS, *WORDS[self.language]))
        self.tgt_len = self.max_digits + 2
        first_word = self.tgt_vocab.ids[WORDS[self.language][0]]
        for index, split in enumerate(SPLITS):
            generator = torch.Generator().manual_seed(self.split_seed * 1_000_003 + index)
            x, digits = canvases(*pools[split], self.sizes[split], self.max_digits, generator)
            count = (digits >= 0).sum(1, keepdim=True)  # (n, 1)
            y = torch.full((len(x), self.tgt_len), PAD_ID, dtype=torch.long)
            y[:, 0], y[:, 1 : self.max_digits + 1] = BOS_ID, torch.where(digits >= 0, digits + first_word, PAD_ID)
            self.splits[split] = (x, y.scatter_(1, count + 1, EOS_ID))
        std, mean = torch.std_mean(self.splits["train"][0])
        self.stats = {"mean": float(mean), "std": float(std)}
        for x, _ in self.splits.values():
            x.sub_(mean).div_(std.clamp_min(1e-6))

    @property
    def spec(self) -> dict[str, Any]:
        self.setup()
        _, channels, height, width = self.splits["train"][0].shape
        return {
            "channels": channels,
            "image_height": height,
            "image_width": width,
            "patch_size": self.patch_size,
            **self.target_spec,
        }

    def as_images(self, x: Tensor) -> Tensor:
        """Network inputs as images (N, C, H, W), for figures."""
        return x

    def state_dict(self) -> dict[str, Any]:
        """The target vocabulary, the image shape and the normalisation, for ``attnexp-predict image=...``."""
        state = super().state_dict()
        return {**state, "image": self.stats} if state else state


def canvas_from_file(path: str, height: int, width: int, stats: dict[str, float]) -> Tensor:
    """An image file as a network input: grey levels in [0, 1], inverted when the background is light (the
    digits are light on dark, as in MNIST), scaled (by area when shrinking) to fit a ``height`` x ``width`` canvas
    (keeping its aspect),
    placed at the left and centred vertically as the training canvases are, normalised with the training
    canvases' ``mean`` and ``std``.  # (1, height, width)"""
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as file:
            grey = file.convert("L")
    except (OSError, UnidentifiedImageError) as err:
        raise AttnexpError(
            f"Cannot read image={path} ({type(err).__name__}: {err}). Give a PNG or JPEG file of digits "
            "side by side, e.g. image=three_digits.png."
        ) from err
    scale = min(height / grey.height, width / grey.width)
    size = (max(1, round(grey.width * scale)), max(1, round(grey.height * scale)))
    pixels = torch.from_numpy(
        np.asarray(
            grey.resize(size, Image.Resampling.BOX if scale < 1 else Image.Resampling.BILINEAR), dtype=np.float32
        )
        / 255.0
    )
    if pixels.mean() > 0.5:
        pixels = 1.0 - pixels
    canvas = torch.zeros(1, height, width)
    top = (height - pixels.shape[0]) // 2
    canvas[0, top : top + pixels.shape[0], : pixels.shape[1]] = pixels
    return (canvas - stats["mean"]) / max(stats["std"], 1e-6)
