"""Generated data for the diagnostic tasks: made once from a seed, held as whole tensors, no split seen twice."""

from __future__ import annotations

from collections.abc import Callable

import pytorch_lightning as pl
import torch
from torch import Tensor

from attnexp.data.tensor_loader import SplitLoaders
from attnexp.errors import AttnexpError
from attnexp.rules import check

NO_TARGET = -100  # a position that is not scored (the default ignore_index of torch's cross-entropy)
SPLITS = ("train", "val", "test")


class SyntheticDataModule(SplitLoaders, pl.LightningDataModule):
    """Base of the generated tasks: subclasses implement :meth:`generate` and set ``vocab_size``, ``context``
    and ``chance`` (the accuracy of guessing, for the summary's check that a run learnt something).

    Each split is drawn from its own stream of ``split_seed`` (independent of the run's seed, so every run of
    a comparison sees the same data); a val or test input that also occurs in training is dropped and another
    drawn, so no evaluated input was trained on. Targets are ``NO_TARGET`` where nothing is scored.
    """

    vocab_size: int
    context: int
    chance: float
    num_classes: int | None = None  # set for sequence classification (one label per input)

    def __init__(self, train_size: int, val_size: int, test_size: int, batch_size: int, eval_batch_size: int, split_seed: int) -> None:
        super().__init__()
        check("data", train_size=train_size, val_size=val_size, test_size=test_size, batch_size=batch_size,
              eval_batch_size=eval_batch_size)
        self.sizes = {"train": train_size, "val": val_size, "test": test_size}
        self.batch_size, self.eval_batch_size, self.split_seed = batch_size, eval_batch_size, split_seed
        self.splits: dict[str, tuple[Tensor, Tensor]] = {}

    @property
    def spec(self) -> dict[str, int]:
        """Shape facts a network is built from."""
        spec = {"vocab_size": self.vocab_size, "context": self.context}
        return spec if self.num_classes is None else {**spec, "num_classes": self.num_classes}

    def generate(self, n: int, split: str, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``n`` inputs of token ids and their targets.  # (n, context), (n, context) or (n,)"""
        raise NotImplementedError

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        seen: set[bytes] = set()
        for index, split in enumerate(SPLITS):
            generator = torch.Generator().manual_seed(self.split_seed * 1_000_003 + index)
            x, y = self._unseen(split, generator, seen)
            if split == "train":
                seen = {row.numpy().tobytes() for row in x}
            self.splits[split] = (x, y)

    def _unseen(self, split: str, generator: torch.Generator, seen: set[bytes]) -> tuple[Tensor, Tensor]:
        """``sizes[split]`` examples whose inputs are not in ``seen``."""
        return self.fresh(self.sizes[split], lambda n: self.generate(n, split, generator), seen, split)

    def fresh(self, wanted: int, draw: Callable[[int], tuple[Tensor, Tensor]], seen: set[bytes], split: str) -> tuple[Tensor, Tensor]:
        """``wanted`` examples from ``draw(n)`` whose inputs are not in ``seen``, drawing more where some were."""
        xs, ys, kept = [], [], 0
        for _ in range(8):
            x, y = draw(wanted - kept + (wanted - kept) // 4 + 8)
            new = torch.tensor([row.numpy().tobytes() not in seen for row in x], dtype=torch.bool)
            xs.append(x[new]), ys.append(y[new])
            kept += int(new.sum())
            if kept >= wanted:
                return torch.cat(xs)[:wanted], torch.cat(ys)[:wanted]
        raise AttnexpError(
            f"data.{split}_size={self.sizes[split]} is more {split} examples than this task's settings can make without "
            f"repeating a training input (found {kept} of {wanted}): the space of inputs is too small. Use a smaller "
            f"data.{split}_size or data.train_size, or longer or more varied sequences."
        )

    def state_dict(self) -> dict[str, int]:
        return {"vocab_size": self.vocab_size, "context": self.context}


def distinct(n: int, k: int, low: int, high: int, generator: torch.Generator) -> Tensor:
    """``k`` distinct integers from [low, high) in each of ``n`` rows, in random order.  # (n, k)

    The ranks of uniform draws, taken a block of rows at a time so a large range (a vocabulary of 8192) fits in memory."""
    rows = max(1, 2**24 // (high - low))
    return torch.cat([
        torch.rand(min(rows, n - start), high - low, generator=generator).topk(k, dim=1, largest=False).indices
        for start in range(0, max(n, 1), rows)
    ]) + low


def positions(n: int, k: int, slots: int, generator: torch.Generator) -> Tensor:
    """``k`` distinct sorted positions out of ``slots`` in each of ``n`` rows.  # (n, k)"""
    return distinct(n, k, 0, slots, generator).sort(dim=1).values
