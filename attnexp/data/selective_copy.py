"""Selective copying: data tokens scattered among noise; after a marker, emit the data tokens in order."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnexp.data.synthetic import SyntheticDataModule, positions
from attnexp.errors import AttnexpError
from attnexp.rules import check
from attnexp.tokens import NO_TARGET

NOISE, GO = 0, 1


class SelectiveCopyDataModule(SyntheticDataModule):
    """A region of ``seq_len`` noise tokens (id 0) holding ``num_tokens`` data tokens (ids 2 .. vocab-1) at
    random positions, then a marker (id 1) and the data tokens in order, fed back as in next-token
    prediction: the answers are the data tokens, predicted at the marker and after each one. Sequences
    hold ``seq_len + num_tokens`` tokens.
    """

    def __init__(
        self,
        vocab: int = 16,
        seq_len: int = 64,
        num_tokens: int = 8,
        **splits: Any,
    ) -> None:
        super().__init__(**splits)
        check("data", vocab=vocab, seq_len=seq_len, num_tokens=num_tokens)
        if vocab < 3 or num_tokens > seq_len:
            raise AttnexpError(
                f"data.num_tokens={num_tokens} with data.seq_len={seq_len} and data.vocab={vocab} do not fit: the data "
                "tokens must fit in the region, and the vocabulary holds noise, the marker and at least one data token "
                f"(vocab >= 3). E.g. data.num_tokens={min(num_tokens, seq_len)} data.vocab=16."
            )
        self.vocab_size, self.context, self.region, self.num_tokens = vocab, seq_len + num_tokens, seq_len, num_tokens

    def generate(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        k, region = self.num_tokens, self.region
        data = torch.randint(2, self.vocab_size, (n, k), generator=generator)  # (n, K)
        x = torch.full((n, self.context), NOISE, dtype=torch.long)
        x.scatter_(1, positions(n, k, region, generator), data)
        x[:, region], x[:, region + 1 :] = GO, data[:, :-1]
        y = torch.full_like(x, NO_TARGET)
        y[:, region:] = data  # at the marker: the first data token; after each data token: the next
        return x, y
