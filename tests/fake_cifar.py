"""Small CIFAR-10 batch files in the real ``cifar-10-batches-py`` pickle format."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

LABEL_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def write_batch(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    """One batch file: rows of 3072 uint8 values (1024 red, 1024 green, 1024 blue), row-major pixels."""
    entry = {
        "batch_label": path.name,
        "labels": labels.tolist(),
        "data": images.reshape(len(images), 3 * 32 * 32).astype(np.uint8),
        "filenames": [f"image_{i}.png" for i in range(len(images))],
    }
    path.write_bytes(pickle.dumps(entry, protocol=2))


def fake_cifar(root: Path, per_batch: int = 20, n_test: int = 20, seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Write data_batch_1..5, test_batch and batches.meta under ``root``; return the arrays (N, 3, 32, 32)."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name, n in [(f"data_batch_{i}", per_batch) for i in range(1, 6)] + [("test_batch", n_test)]:
        images = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n)
        write_batch(folder / name, images, labels)
        arrays[name] = (images, labels)
    meta = {"label_names": LABEL_NAMES, "num_cases_per_batch": per_batch, "num_vis": 3072}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return arrays
