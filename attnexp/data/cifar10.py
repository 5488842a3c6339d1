"""CIFAR-10 through torchvision's parser, held whole in memory as one uint8 tensor per split."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import torch
from torch import Tensor
from torchvision.datasets import CIFAR10
from torchvision.datasets.utils import check_integrity

from attnexp.data.image_datamodule import ImageDataModule
from attnexp.errors import AttnexpError

OFFICIAL_MD5 = dict(CIFAR10.train_list + CIFAR10.test_list) | {CIFAR10.meta["filename"]: CIFAR10.meta["md5"]}
BATCH_FILES = list(OFFICIAL_MD5)


class CIFAR10FilesOnly(CIFAR10):
    """torchvision's CIFAR10 that requires the batch files to exist instead of matching the official md5 sums."""

    train_list: ClassVar = [[name, None] for name, _ in CIFAR10.train_list]
    test_list: ClassVar = [[name, None] for name, _ in CIFAR10.test_list]
    meta: ClassVar = {**CIFAR10.meta, "md5": None}


class CIFAR10DataModule(ImageDataModule):
    """torchvision's CIFAR-10: 50k training images (split into train/val) and the official 10k test set.

    ``verify_checksums=false`` reads batch files that are not the official ones
    (a subset, a re-encoding) through the same parser.
    """

    name, image_size, channels, num_classes = "cifar10", 32, 3, 10

    def __init__(self, *args, download: bool = True, verify_checksums: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.download, self.verify_checksums = download, verify_checksums

    def prepare_data(self) -> None:
        """Download the batches where one is missing (or explain what is missing); reading them is :meth:`setup`'s."""
        folder = Path(self.root).resolve() / CIFAR10.base_folder
        if not all((folder / name).is_file() for name in BATCH_FILES):
            self._read(train=True)

    def files(self) -> dict[str, Path]:
        """The files a run reads, named as they lie under the data root (a run's data identity)."""
        folder = Path(self.root).resolve() / CIFAR10.base_folder
        return {f"{CIFAR10.base_folder}/{name}": folder / name for name in BATCH_FILES}

    def load(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        train, test = self._read(train=True), self._read(train=False)
        return (*self._tensors(train), *self._tensors(test))

    def _tensors(self, split: CIFAR10) -> tuple[Tensor, Tensor]:
        images = torch.from_numpy(split.data).permute(0, 3, 1, 2).contiguous()  # (N, H, W, C) -> (N, C, H, W) uint8
        labels = torch.as_tensor(split.targets, dtype=torch.long)
        if len(labels) != len(images) or labels.min() < 0 or labels.max() >= self.num_classes:
            raise AttnexpError(
                self._problem(
                    f"{len(images)} images with {len(labels)} labels, "
                    f"labels {labels.min()}..{labels.max()} (expected 0..9)"
                )
            )
        return images, labels

    def _read(self, train: bool) -> CIFAR10:
        dataset = CIFAR10 if self.verify_checksums else CIFAR10FilesOnly
        try:
            return dataset(self.root, train=train, download=self.download)
        except Exception as err:  # torchvision raises RuntimeError; a damaged pickle raises almost anything
            text = str(err).splitlines()[0] if str(err) else ""
            raise AttnexpError(self._problem(f"{type(err).__name__}: {text}")) from err

    def _problem(self, detail: str) -> str:
        folder = Path(self.root).resolve() / CIFAR10.base_folder
        missing = [name for name in BATCH_FILES if not (folder / name).is_file()]
        if missing:
            found = f"missing: {', '.join(missing)}"
        elif self.verify_checksums:
            differ = [name for name, md5 in OFFICIAL_MD5.items() if not check_integrity(folder / name, md5)]
            found = f"not the official files (md5 differs): {', '.join(differ) or 'none'}"
        else:
            found = "all files present, so one of them is damaged"
        return (
            f"Could not load CIFAR-10 from {folder} ({found}; {detail}). That folder must hold torchvision's "
            f"python-pickle batches: {', '.join(BATCH_FILES)} (unpacked from cifar-10-python.tar.gz). "
            "Point the data root elsewhere with ATTNEXP_DATA_DIR=/path/to/data or paths.data_dir=/path/to/data "
            "(the folder that holds cifar-10-batches-py), allow the download with data.download=true on a "
            "machine with network (a damaged copy is fetched again), or read files that are not the official "
            "ones with data.verify_checksums=false."
        )
