"""MNIST and Fashion-MNIST through torchvision, held whole in memory."""

from __future__ import annotations

import gzip
import math
import shutil
import struct
from pathlib import Path

from torch import Tensor

from attnexp.data.image_datamodule import ImageDataModule
from attnexp.errors import AttnexpError

# file name -> (magic number, number of dimensions)
IDX_FILES = {
    "train-images-idx3-ubyte": (2051, 3),
    "train-labels-idx1-ubyte": (2049, 1),
    "t10k-images-idx3-ubyte": (2051, 3),
    "t10k-labels-idx1-ubyte": (2049, 1),
}


def check_idx(path: Path, magic: int, ndim: int) -> None:
    """Check an uncompressed IDX file's magic number, and that its size matches its header."""
    with path.open("rb") as f:
        header = f.read(4 + 4 * ndim)
    found = struct.unpack(">i", header[:4])[0] if len(header) >= 4 else None
    if len(header) < 4 + 4 * ndim or found != magic:
        raise AttnexpError(
            f"{path} is not an MNIST IDX file: magic number {found}, expected {magic}. "
            "Replace it with the original file (or delete it and set data.download=true)."
        )
    dims = struct.unpack(f">{ndim}I", header[4:])
    expected, size = 4 + 4 * ndim + math.prod(dims), path.stat().st_size
    if size != expected:
        raise AttnexpError(
            f"{path} is truncated or corrupt: its header announces {' x '.join(map(str, dims))} values "
            f"({expected} bytes) but the file has {size} bytes. Replace it with the original file "
            "(or delete it and set data.download=true)."
        )


class MNISTDataModule(ImageDataModule):
    """torchvision's MNIST: 60k training images (split into train/val) and the official 10k test set."""

    name, image_size, channels, num_classes = "mnist", 28, 1, 10
    folder = "MNIST"  # torchvision's folder under the data root, holding raw/
    package_dir: Path | None = None  # where a system package installs the gzipped files, used before a download

    def __init__(self, *args, download: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.download = download

    @property
    def raw(self) -> Path:
        return Path(self.root).resolve() / self.folder / "raw"

    def prepare_data(self) -> None:
        """Take the files from the system package where one is missing, else download (or explain what is missing);
        reading them is :meth:`setup`'s."""
        if all((self.raw / name).is_file() for name in IDX_FILES):
            return
        packaged = [self.package_dir / f"{name}.gz" for name in IDX_FILES] if self.package_dir else []
        if packaged and all(p.is_file() for p in packaged):
            self.raw.mkdir(parents=True, exist_ok=True)
            for path in packaged:
                with gzip.open(path, "rb") as src, (self.raw / path.stem).open("wb") as dst:
                    shutil.copyfileobj(src, dst)
            return
        self._read(train=True)

    def files(self) -> dict[str, Path]:
        """The files a run reads, named as they lie under the data root (a run's data identity)."""
        return {f"{self.folder}/raw/{name}": self.raw / name for name in IDX_FILES}

    def load(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        train, test = self._read(train=True), self._read(train=False)
        return train.data.unsqueeze(1), train.targets, test.data.unsqueeze(1), test.targets

    def dataset(self):
        """torchvision's dataset class for these files."""
        from torchvision.datasets import MNIST

        return MNIST

    def _read(self, train: bool):
        raw = self.raw
        for name, (magic, ndim) in IDX_FILES.items():
            if (raw / name).is_file():
                check_idx(raw / name, magic, ndim)
        try:
            return self.dataset()(self.root, train=train, download=self.download)
        except (RuntimeError, OSError, ValueError) as err:
            package = f"install its system package (its files go to {self.package_dir}), " if self.package_dir else ""
            raise AttnexpError(
                f"Could not load {self.folder} from {raw} ({type(err).__name__}: "
                f"{str(err).splitlines()[0] if str(err) else ''}). "
                "Put the four IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                "t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, optionally .gz) in that folder, "
                f"{package}or point the data root elsewhere with ATTNEXP_DATA_DIR=/path/to/data or "
                f"paths.data_dir=/path/to/data (the folder that holds {self.folder}/raw), "
                "or allow the download with data.download=true on a machine with network."
            ) from err


class FashionMNISTDataModule(MNISTDataModule):
    """Zalando's Fashion-MNIST in the same layout: 28x28 grey images of 10 kinds of clothing. Read from
    ``<data root>/FashionMNIST/raw``, else from Debian's ``dataset-fashion-mnist`` package, else downloaded."""

    name, folder = "fashion_mnist", "FashionMNIST"
    package_dir = Path("/usr/share/datasets/fashion-mnist")

    def dataset(self):
        from torchvision.datasets import FashionMNIST

        return FashionMNIST
