"""CIFAR-10 goes through torchvision's real parser on small batch files written here."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from cifar10_files import random_cifar10
from helpers import assert_prepare_data_leaves_reading_to_setup

from attnexp.data import CIFAR10DataModule
from attnexp.errors import AttnexpError


def test_reads_the_batch_files_as_uint8_and_splits(tmp_path):
    arrays = random_cifar10(tmp_path, n_train=100, n_test=20)
    dm = CIFAR10DataModule(root=str(tmp_path), download=False, verify_checksums=False, val_size=20)
    train_x, train_y, test_x, test_y = dm.load()
    assert train_x.dtype == torch.uint8 and train_x.shape == (100, 3, 32, 32)
    assert np.array_equal(train_x.numpy(), arrays["train"][0]) and np.array_equal(test_x.numpy(), arrays["test"][0])
    assert train_y.tolist() == arrays["train"][1].tolist() and test_y.tolist() == arrays["test"][1].tolist()
    dm.setup()
    assert dm.splits["train"][0].shape == (80, 3, 32, 32) and dm.splits["val"][0].shape == (20, 3, 32, 32)
    assert dm.splits["test"][0].shape == (20, 3, 32, 32)
    assert sorted(torch.cat([dm.splits["train"][1], dm.splits["val"][1]]).tolist()) == sorted(train_y.tolist())
    channel_means = dm.splits["train"][0].mean(dim=(0, 2, 3))
    torch.testing.assert_close(channel_means, torch.zeros(3), atol=1e-4, rtol=0)
    assert dm.spec == {"image_size": 32, "channels": 3, "patch_size": None, "num_classes": 10}


@pytest.mark.parametrize("patch_size", [4, None])
def test_every_split_is_normalised_per_channel_with_the_training_split_statistics(tmp_path, patch_size):
    random_cifar10(tmp_path, n_train=100, n_test=20)
    dm = CIFAR10DataModule(
        root=str(tmp_path), download=False, verify_checksums=False, val_size=20, patch_size=patch_size
    )
    loaded = dm.load()
    kept = [t.clone() for t in loaded]
    dm.load = lambda: loaded
    dm.setup()
    assert dm.splits["train"][0].shape == ((80, 64, 48) if patch_size else (80, 3, 32, 32))
    assert all(torch.equal(a, b) for a, b in zip(loaded, kept))  # the loaded tensors are left as they were
    train_x, _, test_x, _ = (t.double() for t in loaded)
    train_idx = torch.randperm(100, generator=torch.Generator().manual_seed(dm.split_seed))[
        20:
    ]  # the split's own permutation
    mean, std = (
        train_x[train_idx].mean(dim=(0, 2, 3), keepdim=True),
        train_x[train_idx].std(dim=(0, 2, 3), keepdim=True),
    )
    for split, raw in (("train", train_x[train_idx]), ("test", test_x)):
        torch.testing.assert_close(dm.as_images(dm.splits[split][0]).double(), (raw - mean) / std, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupt_batch_file_is_explained(tmp_path, damage):
    random_cifar10(tmp_path, n_train=100, n_test=20)
    path = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    path.write_bytes(b"not a pickle" * 10 if damage == "garbage" else path.read_bytes()[:5000])
    dm = CIFAR10DataModule(root=str(tmp_path), download=False, verify_checksums=False)
    with pytest.raises(AttnexpError, match="one of them is damaged") as err:
        dm.setup()
    assert str(tmp_path / "cifar-10-batches-py") in str(err.value) and "data.download=true" in str(err.value)


def test_files_that_are_not_the_official_ones_are_named(tmp_path):
    random_cifar10(tmp_path, n_train=100, n_test=20)
    with pytest.raises(AttnexpError, match=r"md5 differs\): data_batch_1, .*batches.meta.*data.verify_checksums=false"):
        CIFAR10DataModule(root=str(tmp_path), download=False).setup()


@pytest.mark.parametrize("step", ["prepare_data", "setup"])
def test_missing_cifar_says_where_it_looked(tmp_path, step):
    random_cifar10(tmp_path, n_train=100, n_test=20)
    (tmp_path / "cifar-10-batches-py" / "test_batch").unlink()
    dm = CIFAR10DataModule(root=str(tmp_path), download=False, verify_checksums=False)
    with pytest.raises(AttnexpError, match=r"missing: test_batch;.*ATTNEXP_DATA_DIR") as err:
        getattr(dm, step)()
    assert str(tmp_path / "cifar-10-batches-py") in str(err.value)


def test_prepare_data_leaves_batches_that_are_there_to_setup(tmp_path, monkeypatch):
    random_cifar10(tmp_path, n_train=100, n_test=20)
    dm = CIFAR10DataModule(root=str(tmp_path), val_size=10, download=False, verify_checksums=False)
    assert_prepare_data_leaves_reading_to_setup(dm, monkeypatch)
