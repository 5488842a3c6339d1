"""Whole-batch augmentation: what it keeps, what it does, and that a seed fixes it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from attnexp.data import BatchAugment, DigitsDataModule
from attnexp.errors import AttnexpError


def images(n: int = 16, c: int = 3, side: int = 8) -> torch.Tensor:
    return torch.randn(n, c, side, side, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
def test_keeps_shape_and_dtype(dtype):
    x = (images() * 50 + 100).clamp(0, 255).to(dtype)
    out = BatchAugment(crop_padding=2, flip=True)(x)
    assert out.shape == x.shape and out.dtype == dtype
    assert not torch.equal(out, x)


def test_same_seed_same_batch_other_seed_other_batch():
    x, augment = images(), BatchAugment(crop_padding=3, flip=True)
    a = augment(x, torch.Generator().manual_seed(7))
    b = augment(x, torch.Generator().manual_seed(7))
    c = augment(x, torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)
    torch.manual_seed(3)
    d = augment(x)
    torch.manual_seed(3)
    assert torch.equal(d, augment(x))  # the global generator, seeded by the run's seed


def test_flip_mirrors_some_images_and_keeps_the_others():
    x = images(32)
    out = BatchAugment(crop_padding=0, flip=True)(x, torch.Generator().manual_seed(0))
    mirrored = torch.tensor([torch.equal(o, i.flip(-1)) for o, i in zip(out, x)])
    kept = torch.tensor([torch.equal(o, i) for o, i in zip(out, x)])
    assert torch.all(mirrored ^ kept) and mirrored.any() and kept.any()


def test_crop_is_a_shifted_window_of_the_padded_image():
    x, p = images(12), 2
    out = BatchAugment(crop_padding=p, flip=False)(x, torch.Generator().manual_seed(1))
    padded = F.pad(x, (p, p, p, p))
    shifts = set()
    for o, full in zip(out, padded):
        matches = [
            (dy, dx)
            for dy in range(2 * p + 1)
            for dx in range(2 * p + 1)
            if torch.equal(o, full[:, dy : dy + 8, dx : dx + 8])
        ]
        assert len(matches) == 1
        shifts.add(matches[0])
    assert len(shifts) > 1


def test_datamodule_augments_training_batches_only_and_keeps_labels():
    dm = DigitsDataModule(patch_size=2, val_size=180, augment=BatchAugment(crop_padding=1, flip=True))
    dm.setup()
    x, y = next(iter(dm.train_dataloader()))
    dm.trainer = SimpleNamespace(training=True)
    ax, ay = dm.on_after_batch_transfer((x, y), 0)
    assert ax.shape == x.shape == (64, 16, 4) and ax.dtype == x.dtype and ay is y
    assert not torch.equal(ax, x)
    dm.trainer = SimpleNamespace(training=False)  # validation and test batches pass untouched
    assert dm.on_after_batch_transfer((x, y), 0)[0] is x


def test_negative_padding_is_explained():
    with pytest.raises(AttnexpError, match=r"crop_padding=-1.*>= 0.*data.augment=null"):
        BatchAugment(crop_padding=-1)
