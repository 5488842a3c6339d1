"""MNIST and Fashion-MNIST go through torchvision's real parser on small IDX files written here."""

from __future__ import annotations

import gzip

import pytest
import torch
from helpers import assert_prepare_data_leaves_reading_to_setup, fake_mnist

from attnexp.data import FashionMNISTDataModule, MNISTDataModule, patchify
from attnexp.data.image_datamodule import unpatchify
from attnexp.errors import AttnexpError


def test_mnist_reads_idx_files_and_cuts_patches(tmp_path):
    arrays = fake_mnist(tmp_path)
    dm = MNISTDataModule(root=str(tmp_path), patch_size=7, val_size=20, download=False)
    dm.setup()
    x, y = dm.splits["train"]
    assert x.shape == (100, 16, 49) and dm.splits["val"][0].shape == (20, 16, 49)
    assert dm.splits["test"][0].shape == (40, 16, 49)
    assert sorted(torch.cat([y, dm.splits["val"][1]]).tolist()) == sorted(arrays["train"][1].tolist())
    torch.testing.assert_close(dm.splits["test"][1], torch.as_tensor(arrays["t10k"][1]).long())
    images = dm.as_images(dm.splits["test"][0])  # back to pixels: undo patches and normalisation
    raw = torch.as_tensor(arrays["t10k"][0]).float().unsqueeze(1)
    assert torch.corrcoef(torch.stack([images.flatten(), raw.flatten()]))[0, 1] > 0.9999
    assert dm.spec == {"image_size": 28, "channels": 1, "patch_size": 7, "num_classes": 10}
    batch_x, batch_y = next(iter(dm.train_dataloader()))
    assert batch_x.shape == (64, 16, 49) and batch_y.dtype == torch.long


def test_patchify_roundtrip_and_order():
    images = torch.arange(2 * 3 * 4 * 4, dtype=torch.float32).reshape(2, 3, 4, 4)
    patches = patchify(images, 2)
    assert patches.shape == (2, 4, 12)
    torch.testing.assert_close(patches[0, 1], images[0, :, 0:2, 2:4].flatten())  # row-major patch order
    torch.testing.assert_close(unpatchify(patches, 3, 2), images)


def test_patch_size_must_divide_image():
    with pytest.raises(AttnexpError, match=r"patch_size=5 does not divide .* 28.*Allowed: \[1, 2, 4, 7, 14, 28\]"):
        MNISTDataModule(root="unused", patch_size=5)


@pytest.mark.parametrize("step", ["prepare_data", "setup"])
def test_missing_mnist_says_where_it_looked(tmp_path, step):
    dm = MNISTDataModule(root=str(tmp_path), patch_size=7, download=False)
    with pytest.raises(AttnexpError, match="ATTNEXP_DATA_DIR") as err:
        getattr(dm, step)()
    assert str(tmp_path / "MNIST" / "raw") in str(err.value)


def test_prepare_data_leaves_files_that_are_there_to_setup(tmp_path, monkeypatch):
    fake_mnist(tmp_path)
    dm = MNISTDataModule(root=str(tmp_path), patch_size=7, val_size=20, download=False)
    assert_prepare_data_leaves_reading_to_setup(dm, monkeypatch)


def test_sampler_splits_epochs_across_ranks(monkeypatch):
    from attnexp.data import tensor_loader as tl

    def order(rank, world, epoch):
        monkeypatch.setattr(tl, "rank_and_world", lambda: (rank, world))
        sampler = tl.BatchIndexSampler(103, 10, shuffle=True, seed=5)
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        return torch.cat(batches)

    ranks = [order(r, 2, epoch=1) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == 51 and not set(ranks[0].tolist()) & set(ranks[1].tolist())
    assert not torch.equal(order(0, 2, epoch=2), ranks[0])  # a new share every epoch
    assert torch.equal(order(0, 1, epoch=1), order(0, 1, epoch=1)) and len(order(0, 1, epoch=1)) == 103
    monkeypatch.setattr(tl, "rank_and_world", lambda: (1, 2))
    assert len(list(tl.BatchIndexSampler(103, 10, shuffle=False))) == 11  # evaluation is not split


def test_fashion_mnist_reads_its_folder(tmp_path):
    arrays = fake_mnist(tmp_path, folder="FashionMNIST")
    dm = FashionMNISTDataModule(root=str(tmp_path), patch_size=7, val_size=20, download=False)
    dm.setup()
    torch.testing.assert_close(dm.splits["test"][1], torch.as_tensor(arrays["t10k"][1]).long())
    assert dm.spec["num_classes"] == 10


def test_fashion_mnist_comes_from_the_debian_package_when_the_folder_is_empty(tmp_path, monkeypatch):
    """Debian's dataset-fashion-mnist installs the four files gzipped: they are unpacked into the data root."""
    arrays = fake_mnist(tmp_path / "source", folder="FashionMNIST")
    package = tmp_path / "package"
    package.mkdir()
    for path in (tmp_path / "source" / "FashionMNIST" / "raw").iterdir():
        (package / f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes()))
    monkeypatch.setattr(FashionMNISTDataModule, "package_dir", package)
    dm = FashionMNISTDataModule(root=str(tmp_path / "root"), patch_size=7, val_size=20, download=False)
    dm.prepare_data()
    dm.setup()
    torch.testing.assert_close(dm.splits["test"][1], torch.as_tensor(arrays["t10k"][1]).long())
    monkeypatch.setattr(FashionMNISTDataModule, "package_dir", tmp_path / "not-installed")
    with pytest.raises(AttnexpError, match=r"FashionMNIST/raw.*system package"):
        FashionMNISTDataModule(root=str(tmp_path / "empty"), patch_size=7, download=False).prepare_data()
