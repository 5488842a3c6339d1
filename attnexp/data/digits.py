"""scikit-learn's bundled 8x8 digits: a fully offline image dataset."""

from __future__ import annotations

import torch
from torch import Tensor

from attnexp.data.image_datamodule import ImageDataModule
from attnexp.errors import AttnexpError
from attnexp.rules import check

TEST_SIZE = 360


class DigitsDataModule(ImageDataModule):
    """1797 8x8 grey digits; a seeded ``test_size`` slice is held out as the test set."""

    name, image_size, channels, num_classes = "digits", 8, 1, 10

    def __init__(self, *args, test_size: int = TEST_SIZE, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        check("data", test_size=test_size)
        self.test_size = test_size

    def load(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        from sklearn.datasets import load_digits

        digits = load_digits()
        images = torch.as_tensor(digits.images, dtype=torch.float32).unsqueeze(1)  # (N, 1, 8, 8)
        labels = torch.as_tensor(digits.target)
        if self.test_size != TEST_SIZE and self.test_size + self.val_size >= len(images):  # else val_size is to blame
            raise AttnexpError(
                f"data.test_size={self.test_size} with data.val_size={self.val_size} leaves nothing to train on: "
                f"digits has {len(images)} images, of which the test and validation splits take these. Use a "
                f"test_size and val_size that sum below {len(images)} (the defaults: 360 and 180)."
            )
        perm = torch.randperm(len(images), generator=torch.Generator().manual_seed(self.split_seed + 1))
        test, train = perm[: self.test_size], perm[self.test_size :]
        return images[train], labels[train], images[test], labels[test]
