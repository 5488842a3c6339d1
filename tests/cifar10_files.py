"""Write images in CIFAR-10's ``cifar-10-batches-py`` pickle format (small stand-ins for tests and benchmarks)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

LABEL_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def write_batch(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    """One batch file: rows of 3072 uint8 values (1024 red, 1024 green, 1024 blue, row-major pixels)."""
    entry = {
        "batch_label": path.name,
        "labels": [int(label) for label in labels],
        "data": images.reshape(len(images), 3 * 32 * 32).astype(np.uint8),
        "filenames": [f"image_{i}.png" for i in range(len(images))],
    }
    path.write_bytes(pickle.dumps(entry, protocol=2))


def write_cifar10(root: Path, train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray]) -> Path:
    """Write data_batch_1..5 (``train`` split in five), test_batch and batches.meta; return the folder.

    Images are uint8 (N, 3, 32, 32), labels ints in 0..9.
    """
    folder = Path(root) / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    for i, (images, labels) in enumerate(zip(np.array_split(train[0], 5), np.array_split(train[1], 5)), start=1):
        write_batch(folder / f"data_batch_{i}", images, labels)
    write_batch(folder / "test_batch", *test)
    meta = {"label_names": LABEL_NAMES, "num_cases_per_batch": len(train[0]) // 5, "num_vis": 3072}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return folder


def random_cifar10(root: Path, n_train: int, n_test: int, seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Random images and labels written with :func:`write_cifar10`; returns them by split."""
    rng = np.random.default_rng(seed)

    def split(n):
        return rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8), rng.integers(0, 10, size=n)

    arrays = {"train": split(n_train), "test": split(n_test)}
    write_cifar10(root, arrays["train"], arrays["test"])
    return arrays
