"""Batches sliced from tensors held in memory: no per-sample Python in the hot path."""

from __future__ import annotations

from typing import Iterator

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler


class TensorBatches(Dataset):
    """Indexed by a tensor of indices, returns whole batches ``(x[idx], y[idx])``."""

    def __init__(self, x: Tensor, y: Tensor) -> None:
        if len(x) != len(y):
            raise ValueError(f"inputs ({len(x)}) and targets ({len(y)}) differ in length.")
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, idx: Tensor) -> tuple[Tensor, Tensor]:
        return self.x[idx], self.y[idx]


class BatchIndexSampler(Sampler[Tensor]):
    """Yields index tensors of ``batch_size`` (the last may be short), reshuffled every epoch."""

    def __init__(self, size: int, batch_size: int, shuffle: bool) -> None:
        self.size, self.batch_size, self.shuffle = size, batch_size, shuffle

    def __len__(self) -> int:
        return -(-self.size // self.batch_size)

    def __iter__(self) -> Iterator[Tensor]:
        order = torch.randperm(self.size) if self.shuffle else torch.arange(self.size)
        return iter(order.split(self.batch_size))


def tensor_loader(x: Tensor, y: Tensor, batch_size: int, shuffle: bool) -> DataLoader:
    """A DataLoader over in-memory tensors that fetches a whole batch with one indexing op."""
    return DataLoader(TensorBatches(x, y), sampler=BatchIndexSampler(len(x), batch_size, shuffle), batch_size=None)
