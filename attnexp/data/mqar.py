"""Multi-query associative recall (MQAR): key-value pairs, then queries of some keys; emit each one's value."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnexp.data.synthetic import SyntheticDataModule, distinct, positions
from attnexp.errors import AttnexpError
from attnexp.rules import check
from attnexp.tokens import NO_TARGET


class MQARDataModule(SyntheticDataModule):
    """Sequences of ``seq_len`` tokens: ``num_pairs`` pairs ``k v`` (distinct keys), then, in the rest of the
    sequence, ``num_queries`` of those keys (default: all) each followed by its value, at random even
    offsets among blank tokens (id 0). Read as next-token prediction, the answer at each queried key is its
    value; only those positions are scored. Keys are ids 1 .. (vocab-1)/2, values the ids above (guessing
    one of the values in the context, not solving the task, is right about 1 time in ``num_pairs``).

    Zoology's protocol (Arora et al. 2023) is three options: ``power_a`` < 1 draws the query gaps (in pairs of
    slots after the key-value pairs) with probability proportional to gap^(power_a - 1), so most queries come
    soon after the pairs (1: uniform); ``distinct_values`` makes a sequence's values differ as its keys do;
    ``answers_shown=false`` leaves a blank after each queried key instead of its value.
    """

    def __init__(
        self,
        vocab: int = 256,
        seq_len: int = 64,
        num_pairs: int = 8,
        num_queries: int | None = None,
        power_a: float = 1.0,
        distinct_values: bool = False,
        answers_shown: bool = True,
        **splits: Any,
    ) -> None:
        super().__init__(**splits)
        check(
            "data",
            vocab=vocab,
            seq_len=seq_len,
            num_pairs=num_pairs,
            num_queries=num_queries,
            power_a=power_a,
            distinct_values=distinct_values,
            answers_shown=answers_shown,
        )
        queries = num_pairs if num_queries is None else num_queries
        self.keys = (vocab - 1) // 2
        if queries > num_pairs or num_pairs > self.keys or 2 * num_pairs + 2 * queries > seq_len:
            raise AttnexpError(
                f"data.num_pairs={num_pairs} with {queries} queries does not fit: the pairs and the queried pairs take "
                f"2 * {num_pairs} + 2 * {queries} tokens of data.seq_len={seq_len}, the keys must be distinct among "
                f"{self.keys} key tokens (data.vocab={vocab}), and a query asks for one of the pairs. "
                f"E.g. data.num_pairs={max(1, min(self.keys, seq_len // 4))} or a longer data.seq_len."
            )
        self.vocab_size, self.context, self.num_pairs, self.num_queries = vocab, seq_len, num_pairs, queries
        self.power_a, self.distinct_values, self.answers_shown = power_a, distinct_values, answers_shown

    def generate(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        p, q, first_value = self.num_pairs, self.num_queries, 1 + self.keys
        keys = distinct(n, p, 1, first_value, generator)  # (n, P)
        if self.distinct_values:
            values = distinct(n, p, first_value, self.vocab_size, generator)  # (n, P)
        else:
            values = torch.randint(first_value, self.vocab_size, (n, p), generator=generator)  # (n, P)
        x = torch.zeros(n, self.context, dtype=torch.long)
        x[:, 0 : 2 * p : 2], x[:, 1 : 2 * p : 2] = keys, values
        asked = distinct(n, q, 0, p, generator)  # (n, Q) which pairs are queried, in random order
        if self.power_a != 1:
            asked = asked.sort(
                dim=1
            ).values  # Zoology's order: the earlier pair takes the earlier-drawn (likely nearer) gap
        at = 2 * p + 2 * self.gaps(n, q, (self.context - 2 * p) // 2, generator)  # (n, Q) where each query stands
        answer = values.gather(1, asked)  # (n, Q)
        x.scatter_(1, at, keys.gather(1, asked))
        if self.answers_shown:
            x.scatter_(1, at + 1, answer)
        y = torch.full_like(x, NO_TARGET).scatter_(1, at, answer)  # (n, L)
        return x, y

    def gaps(self, n: int, q: int, slots: int, generator: torch.Generator) -> Tensor:
        """Each query's slot after the pairs, distinct in a row: uniform, or from Zoology's power law over gaps.  #
        (n, Q)"""
        if self.power_a == 1:
            return positions(n, q, slots, generator)
        gap = torch.arange(1, slots + 1, dtype=torch.float64)
        weights = (self.power_a * gap ** (self.power_a - 1)).expand(n, slots)  # (n, slots)
        return torch.multinomial(weights, q, replacement=False, generator=generator)
