"""MNIST through torchvision, held whole in memory."""

from __future__ import annotations

from pathlib import Path

from torch import Tensor

from attnexp.data.image_datamodule import ImageDataModule
from attnexp.errors import AttnexpError


class MNISTDataModule(ImageDataModule):
    """torchvision's MNIST: 60k training images (split into train/val) and the official 10k test set."""

    name, image_size, channels, num_classes = "mnist", 28, 1, 10

    def __init__(self, *args, download: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.download = download

    def prepare_data(self) -> None:
        self._read(train=True)

    def load(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        train, test = self._read(train=True), self._read(train=False)
        return train.data.unsqueeze(1), train.targets, test.data.unsqueeze(1), test.targets

    def _read(self, train: bool):
        from torchvision.datasets import MNIST

        raw = Path(self.root).resolve() / "MNIST" / "raw"
        try:
            return MNIST(self.root, train=train, download=self.download)
        except (RuntimeError, OSError, ValueError) as err:
            raise AttnexpError(
                f"Could not load MNIST from {raw} ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}). "
                "Put the four IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, optionally .gz) in that folder, "
                "or point the data root elsewhere with ATTNEXP_DATA_DIR=/path/to/data or "
                "paths.data_dir=/path/to/data (the folder that holds MNIST/raw), "
                "or allow the download with data.download=true on a machine with network."
            ) from err
