"""Batches sliced from tensors held in memory: no per-sample Python in the hot path. Training data is held where the
model trains: a GPU run copies its training split to the GPU once and slices every batch there (no copy from the host
and no wait for one at each step)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

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


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the number of processes in data-parallel training (0, 1 otherwise)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class EpochSampler(Sampler[Tensor]):
    """A sampler whose draws of epoch ``e`` depend only on ``seed`` and ``e`` (Lightning calls :meth:`set_epoch`), so a
    resumed run sees an uninterrupted one's batches; ``seed`` defaults to the seed torch was seeded with, ``device`` is
    where the indices go (the data's: drawn on the CPU, so any device draws alike)."""

    def __init__(self, seed: int | None = None, device: torch.device | None = None) -> None:
        self.seed = torch.initial_seed() if seed is None else seed
        self.device = device
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


class BatchIndexSampler(EpochSampler):
    """Yields index tensors of ``batch_size`` (the last may be short), reshuffled every epoch.

    The order of epoch ``e`` depends only on ``seed`` and ``e`` (Lightning calls
    :meth:`set_epoch`), so a run resumed from a checkpoint sees the same batches
    as an uninterrupted one. ``seed`` defaults to the seed torch was seeded with.
    Under data-parallel training a shuffling sampler gives each rank its own
    equal share of every epoch's permutation (set ``use_distributed_sampler=false``
    so Lightning leaves it in place); evaluation order is not split.
    """

    def __init__(
        self, size: int, batch_size: int, shuffle: bool, seed: int | None = None, device: torch.device | None = None
    ) -> None:
        super().__init__(seed, device)
        self.size, self.batch_size, self.shuffle = size, batch_size, shuffle

    def _share(self) -> tuple[int, int, int]:
        rank, world = rank_and_world() if self.shuffle else (0, 1)
        return rank, world, self.size // world

    def __len__(self) -> int:
        return (self._share()[2] + self.batch_size - 1) // self.batch_size  # the last batch may be short

    def __iter__(self) -> Iterator[Tensor]:
        # A generator: the order is drawn at the first batch, after Lightning's set_epoch,
        # even when the iterator was created earlier (as on resume).
        if self.shuffle:
            rank, world, share = self._share()
            generator = torch.Generator().manual_seed(self.seed + 1_000_003 * self.epoch)
            order = torch.randperm(self.size, generator=generator)[rank::world][:share]
            yield from order.to(self.device).split(self.batch_size)  # one copy an epoch
        else:
            yield from torch.arange(self.size, device=self.device).split(self.batch_size)


class StreamWindows(Dataset):
    """Next-token windows of a token stream, indexed by a tensor of start positions: ``(x, y)`` of ``context`` tokens
    each, ``y`` one token later.  # (N,) -> (B, T), (B, T)"""

    def __init__(self, ids: Tensor, context: int) -> None:
        self.cut = ids.unfold(0, context + 1, 1)  # a view: (N - T, T + 1)

    def __len__(self) -> int:
        return len(self.cut)

    def __getitem__(self, starts: Tensor) -> tuple[Tensor, Tensor]:
        w = self.cut[starts]  # (B, T + 1)
        return w[:, :-1], w[:, 1:]


class RandomStarts(EpochSampler):
    """``count`` window starts a epoch, drawn uniformly from ``[0, size)`` (with replacement, as GPT training samples
    its batches), in batches of ``batch_size``. The draws of epoch ``e`` depend only on ``seed``, ``e`` and the rank
    (each rank of data-parallel training draws ``count / world`` of its own), so a resumed run sees the same windows."""

    def __init__(
        self, count: int, size: int, batch_size: int, seed: int | None = None, device: torch.device | None = None
    ) -> None:
        super().__init__(seed, device)
        self.count, self.size, self.batch_size = count, size, batch_size

    def __len__(self) -> int:
        return (self.count // rank_and_world()[1] + self.batch_size - 1) // self.batch_size

    def __iter__(self) -> Iterator[Tensor]:
        rank, world = rank_and_world()
        generator = torch.Generator().manual_seed(self.seed + 1_000_003 * self.epoch + 7_919 * rank)
        starts = torch.randint(self.size, (self.count // world,), generator=generator)
        yield from starts.to(self.device).split(self.batch_size)  # one copy an epoch


def tensor_loader(
    x: Tensor, y: Tensor, batch_size: int, shuffle: bool, device: torch.device | None = None
) -> DataLoader:
    """A DataLoader over in-memory tensors that fetches a whole batch with one indexing op; on ``device`` (copied there
    once), else where the tensors are."""
    device = device or x.device
    sampler = BatchIndexSampler(len(x), batch_size, shuffle, device=device)
    return DataLoader(TensorBatches(x.to(device), y.to(device)), sampler=sampler, batch_size=None)


def training_device(datamodule: Any) -> torch.device:
    """Where a data module's training batches go: its trainer's device, else the CPU (a loader made outside a fit)."""
    trainer = getattr(datamodule, "trainer", None)
    return trainer.strategy.root_device if trainer is not None else torch.device("cpu")
