"""Sequence operations (copy, reverse, sort) trained on short sequences and tested on longer ones too."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import Tensor

from attnexp.data.synthetic import SyntheticDataModule
from attnexp.errors import AttnexpError
from attnexp.rules import check
from attnexp.tokens import NO_TARGET

PAD, GO = 0, 1
OPS = ("copy", "reverse", "sort")


class SeqOpsDataModule(SyntheticDataModule):
    """A random sequence of n tokens (ids 2 .. vocab-1), a marker (id 1), then ``op`` of the sequence fed back as
    in next-token prediction; padded with id 0 at the end. Answers (scored) are the n output tokens.

    Train and val sequences have 1 to ``train_max_len`` tokens; the test split has equal shares of each of
    ``test_lengths`` (longer lengths measure length generalisation: ``test/acc@len=N``).
    """

    apart = ("test",)

    def __init__(
        self,
        op: str = "copy",
        vocab: int = 16,
        train_max_len: int = 16,
        test_lengths: tuple[int, ...] = (8, 16, 24, 32),
        **splits: Any,
    ) -> None:
        super().__init__(**splits)
        check("data", vocab=vocab, train_max_len=train_max_len)
        lengths = [int(n) for n in test_lengths]
        if op not in OPS:
            raise AttnexpError(
                f"data.op={op!r} is not a sequence operation. Allowed: {', '.join(OPS)}; e.g. data.op=reverse."
            )
        if vocab < 3 or not lengths or min(lengths) < 1:
            raise AttnexpError(
                f"data.vocab={vocab} and data.test_lengths={lengths} cannot make sequences: the vocabulary holds the "
                "padding, the marker and at least one data token (vocab >= 3), and the test needs lengths >= 1. "
                "E.g. data.vocab=16 data.test_lengths=[8,16,24,32]."
            )
        self.op, self.train_max_len, self.test_lengths = op, train_max_len, lengths
        self.vocab_size, self.context = vocab, 2 * max(train_max_len, *lengths)

    def generate(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Train and val: lengths 1 to ``train_max_len``, uniformly."""
        length = torch.randint(1, self.train_max_len + 1, (n,), generator=generator)
        x, y = (
            torch.full((n, self.context), PAD, dtype=torch.long),
            torch.full((n, self.context), NO_TARGET, dtype=torch.long),
        )
        for m in length.unique().tolist():
            rows = (length == m).nonzero().flatten()
            x[rows], y[rows] = self.of_length(len(rows), m, generator)
        return x, y

    def draw_apart(self, split: str, generator: torch.Generator, seen: set[bytes]) -> tuple[Tensor, Tensor]:
        """The test split: equal shares of each test length, none of them a train or val input."""
        lengths, n = self.test_lengths, self.sizes["test"]
        shares = [n // len(lengths) + (i < n % len(lengths)) for i in range(len(lengths))]
        parts = [
            self.fresh(k, partial(self.of_length, m=m, generator=generator), seen, split)
            for m, k in zip(lengths, shares)
        ]
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])

    def of_length(self, n: int, m: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``n`` examples of sequences of ``m`` tokens.  # (n, context), (n, context)"""
        seq = torch.randint(2, self.vocab_size, (n, m), generator=generator)  # (n, m)
        out = {"copy": seq, "reverse": seq.flip(1), "sort": seq.sort(dim=1).values}[self.op]
        x = torch.full((n, self.context), PAD, dtype=torch.long)
        x[:, :m], x[:, m], x[:, m + 1 : 2 * m] = seq, GO, out[:, :-1]
        y = torch.full_like(x, NO_TARGET)
        y[:, m : 2 * m] = out
        return x, y
