"""Single-query associative recall, the induction-head test: ``... a b ... a`` -> ``b``."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnexp.data.synthetic import SyntheticDataModule
from attnexp.errors import AttnexpError
from attnexp.rules import check
from attnexp.tokens import NO_TARGET


class RecallDataModule(SyntheticDataModule):
    """Sequences of ``seq_len`` random tokens of ``vocab`` where a query token occurs exactly twice: somewhere
    in the sequence, followed by its answer, and as the last token. Only the last position is scored: its
    next token is the token that followed the query's first occurrence. A model solves it by finding the
    earlier occurrence and copying what came after it (an induction head, usually two layers).
    """

    def __init__(
        self,
        vocab: int = 32,
        seq_len: int = 64,
        **splits: Any,
    ) -> None:
        super().__init__(**splits)
        check("data", vocab=vocab, seq_len=seq_len)
        if vocab < 3 or seq_len < 4:
            raise AttnexpError(
                f"data.vocab={vocab} and data.seq_len={seq_len} are too small for recall: it needs "
                "at least 3 tokens and 4 positions (query, answer, filler, query). E.g. data.vocab=32 data.seq_len=64."
            )
        self.vocab_size, self.context = vocab, seq_len

    def generate(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        query = torch.randint(0, self.vocab_size, (n, 1), generator=generator)  # (n, 1)
        filler = torch.randint(0, self.vocab_size - 1, (n, self.context), generator=generator)
        x = filler + (filler >= query).long()  # (n, L) every token but the query
        first = torch.randint(
            0, self.context - 2, (n, 1), generator=generator
        )  # its first occurrence, an answer after it
        x.scatter_(1, first, query)
        x[:, -1:] = query
        y = torch.full_like(x, NO_TARGET)
        y[:, -1:] = x.gather(1, first + 1)
        return x, y
