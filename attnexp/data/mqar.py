"""Multi-query associative recall (MQAR): key-value pairs, then queries of some keys; emit each one's value."""

from __future__ import annotations

import torch
from torch import Tensor

from attnexp.data.synthetic import NO_TARGET, SyntheticDataModule, distinct, positions
from attnexp.errors import AttnexpError
from attnexp.rules import check


class MQARDataModule(SyntheticDataModule):
    """Sequences of ``seq_len`` tokens: ``num_pairs`` pairs ``k v`` (distinct keys), then, in the rest of the
    sequence, ``num_queries`` of those keys (default: all) each followed by its value, at random even
    offsets among blank tokens (id 0). Read as next-token prediction, the answer at each queried key is its
    value; only those positions are scored. Keys are ids 1 .. (vocab-1)/2, values the ids above (guessing
    one of the values in the context, not solving the task, is right about 1 time in ``num_pairs``).
    """

    def __init__(self, vocab: int = 256, seq_len: int = 64, num_pairs: int = 8, num_queries: int | None = None,
                 train_size: int = 20000, val_size: int = 1000, test_size: int = 1000, batch_size: int = 64,
                 eval_batch_size: int = 1000, split_seed: int = 0) -> None:
        super().__init__(train_size, val_size, test_size, batch_size, eval_batch_size, split_seed)
        check("data", vocab=vocab, seq_len=seq_len, num_pairs=num_pairs, num_queries=num_queries)
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

    def generate(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        p, q, first_value = self.num_pairs, self.num_queries, 1 + self.keys
        keys = distinct(n, p, 1, first_value, generator)  # (n, P)
        values = torch.randint(first_value, self.vocab_size, (n, p), generator=generator)  # (n, P)
        x = torch.zeros(n, self.context, dtype=torch.long)
        x[:, 0 : 2 * p : 2], x[:, 1 : 2 * p : 2] = keys, values
        asked = distinct(n, q, 0, p, generator)  # (n, Q) which pairs are queried, in random order
        at = 2 * p + 2 * positions(n, q, (self.context - 2 * p) // 2, generator)  # (n, Q) where each query stands
        answer = values.gather(1, asked)  # (n, Q)
        x.scatter_(1, at, keys.gather(1, asked)), x.scatter_(1, at + 1, answer)
        y = torch.full_like(x, NO_TARGET).scatter_(1, at, answer)  # (n, L)
        return x, y
