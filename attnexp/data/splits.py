"""The train, val and test splits a data module holds as tensors, and the settings that deal them: one place for the
batch sizes of every data module and for the sizes and seed of every generated data set."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
from torch import Tensor
from torch.utils.data import DataLoader

from attnexp.data.tensor_loader import tensor_loader, training_device
from attnexp.rules import check

SPLITS = ("train", "val", "test")


class SplitLoaders(pl.LightningDataModule):
    """Train/val/test loaders over ``self.splits[name] = (x, y)``.

    Training batches have ``batch_size``, are reshuffled each epoch and are sliced on the training device;
    evaluation batches have ``eval_batch_size``, keep their order and come from the host (a few large batches an
    epoch, which figures and telemetry also read).
    """

    def __init__(self, batch_size: int = 64, eval_batch_size: int = 1000) -> None:
        super().__init__()
        check("data", batch_size=batch_size, eval_batch_size=eval_batch_size)
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.splits: dict[str, tuple[Tensor, Tensor]] = {}

    def train_dataloader(self) -> DataLoader:
        return tensor_loader(*self.splits["train"], self.batch_size, shuffle=True, device=training_device(self))

    def val_dataloader(self) -> DataLoader:
        return tensor_loader(*self.splits["val"], self.eval_batch_size, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return tensor_loader(*self.splits["test"], self.eval_batch_size, shuffle=False)


class DealtSplits(SplitLoaders):
    """Splits of a generated data set: ``train_size``, ``val_size`` and ``test_size`` examples dealt with
    ``split_seed`` (independent of the run's seed, so every run of a comparison sees the same data). A generated data
    set's constructor takes its own options and passes the rest on (``**splits``)."""

    def __init__(
        self, train_size: int = 20000, val_size: int = 1000, test_size: int = 1000, split_seed: int = 0, **loaders: Any
    ) -> None:
        super().__init__(**loaders)
        check("data", train_size=train_size, val_size=val_size, test_size=test_size, split_seed=split_seed)
        self.sizes = {"train": train_size, "val": val_size, "test": test_size}
        self.split_seed = split_seed
