"""Generated data for the diagnostic tasks: made once from a seed, held as whole tensors, splits dealt from one pool."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor

from attnexp.data.priors import answer_chance, sequence_chance
from attnexp.data.splits import SPLITS, DealtSplits
from attnexp.errors import AttnexpError
from attnexp.tokens import NO_TARGET


class SyntheticDataModule(DealtSplits):
    """Base of the generated tasks: subclasses implement :meth:`generate` and set ``vocab_size`` and ``context``.

    The splits are dealt at random from one pool of distinct inputs drawn from one stream of ``split_seed``
    (independent of the run's seed, so every run of a comparison sees the same data): no input is in two splits,
    and every split follows the same distribution (of lengths, depths). A split with a distribution of its own
    (``apart``: seqops' longer test sequences) is drawn after, from inputs the pool does not hold. Targets are
    ``NO_TARGET`` where nothing is scored. ``chance`` is measured once the splits exist
    (:mod:`attnexp.data.priors`): the best guess that does not solve the task, on the validation split.
    """

    vocab_size: int
    context: int
    chance: float = math.nan
    num_classes: int | None = None  # set for sequence classification (one label per input)
    apart: tuple[str, ...] = ()  # splits drawn from a distribution of their own (:meth:`draw_apart`)

    @property
    def spec(self) -> dict[str, int]:
        """Shape facts a network is built from."""
        spec = {"vocab_size": self.vocab_size, "context": self.context}
        return spec if self.num_classes is None else {**spec, "num_classes": self.num_classes}

    def generate(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``n`` inputs of token ids and their targets.  # (n, context), (n, context) or (n,)"""
        raise NotImplementedError

    def draw_apart(self, split: str, generator: torch.Generator, seen: set[bytes]) -> tuple[Tensor, Tensor]:
        """A split of ``apart``: its own inputs, none of them in ``seen``."""
        raise NotImplementedError

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        generator = torch.Generator().manual_seed(self.split_seed * 1_000_003)
        pooled = [s for s in SPLITS if s not in self.apart]
        x, y = self.fresh(
            sum(self.sizes[s] for s in pooled), lambda n: self.generate(n, generator), set(), " + ".join(pooled)
        )
        order = torch.randperm(len(x), generator=generator)
        start = 0
        for split in pooled:
            taken = order[start : start + self.sizes[split]]
            self.splits[split] = (x[taken], y[taken])
            start += self.sizes[split]
        seen = {row.numpy().tobytes() for row in x}
        for split in self.apart:
            self.splits[split] = self.draw_apart(split, generator, seen)
        measure = sequence_chance if self.num_classes else partial(answer_chance, unscored=NO_TARGET)
        self.chance = measure(self.splits["train"], self.splits["val"])

    def fresh(
        self, wanted: int, draw: Callable[[int], tuple[Tensor, Tensor]], seen: set[bytes], split: str
    ) -> tuple[Tensor, Tensor]:
        """``wanted`` examples from ``draw(n)`` with distinct inputs, none in ``seen``, drawing more where some
        were not."""
        xs, ys, kept, taken = [], [], 0, set(seen)
        for _ in range(8):
            x, y = draw(wanted - kept + (wanted - kept) // 4 + 8)
            unseen = []
            for row in x:
                key = row.numpy().tobytes()
                unseen.append(key not in taken)
                taken.add(key)
            new = torch.tensor(unseen, dtype=torch.bool)
            xs.append(x[new])
            ys.append(y[new])
            kept += int(new.sum())
            if kept >= wanted:
                return torch.cat(xs)[:wanted], torch.cat(ys)[:wanted]
        raise AttnexpError(
            f"{' + '.join(f'data.{name}_size' for name in split.split(' + '))} "
            f"= {wanted} examples with distinct inputs are more than "
            f"this task's settings can make{' without repeating another split' if seen else ''} "
            f"(found {kept}): the space "
            "of inputs is too small. Use smaller data.train_size, data.val_size or data.test_size, or longer or more "
            "varied sequences."
        )

    def state_dict(self) -> dict[str, int]:
        return {"vocab_size": self.vocab_size, "context": self.context}


def distinct(n: int, k: int, low: int, high: int, generator: torch.Generator) -> Tensor:
    """``k`` distinct integers from [low, high) in each of ``n`` rows, in random order.  # (n, k)

    The ranks of uniform draws, taken a block of rows at a time so a large range (a vocabulary of 8192) fits in
    memory."""
    rows = max(1, 2**24 // (high - low))
    return (
        torch.cat(
            [
                torch.rand(min(rows, n - start), high - low, generator=generator).topk(k, dim=1, largest=False).indices
                for start in range(0, max(n, 1), rows)
            ]
        )
        + low
    )


def positions(n: int, k: int, slots: int, generator: torch.Generator) -> Tensor:
    """``k`` distinct sorted positions out of ``slots`` in each of ``n`` rows.  # (n, k)"""
    return distinct(n, k, 0, slots, generator).sort(dim=1).values
