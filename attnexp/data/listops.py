"""ListOps: nested list operations over digits, the expression's value as a 10-way classification."""

from __future__ import annotations

import random
from typing import Any

import torch
from torch import Tensor

from attnexp.data.synthetic import SyntheticDataModule
from attnexp.errors import AttnexpError
from attnexp.rules import check

PAD = "[pad]"
OPERATORS = ("[MAX", "[MIN", "[MED", "[SM")
TOKENS = (PAD, *map(str, range(10)), *OPERATORS, "]")
IDS = {token: i for i, token in enumerate(TOKENS)}
Expression = int | tuple  # a digit, or (operator, [arguments])


def value(expression: Expression) -> int:
    """MAX, MIN, MED (the lower median) and SM (sum modulo 10) of the arguments' values."""
    if isinstance(expression, int):
        return expression
    op, args = expression
    values = sorted(value(a) for a in args)
    return {"[MAX": values[-1], "[MIN": values[0], "[MED": values[(len(values) - 1) // 2], "[SM": sum(values) % 10}[op]


def tokens(expression: Expression) -> list[str]:
    if isinstance(expression, int):
        return [str(expression)]
    op, args = expression
    return [op, *(t for a in args for t in tokens(a)), "]"]


def expression(rng: random.Random, depth: int, max_depth: int, max_args: int, nest: float) -> Expression:
    """A random operator node whose arguments are digits or, with probability ``nest`` below ``max_depth``, nodes."""
    args = [
        expression(rng, depth + 1, max_depth, max_args, nest)
        if depth < max_depth and rng.random() < nest
        else rng.randrange(10)
        for _ in range(rng.randint(2, max_args))
    ]
    return (rng.choice(OPERATORS), args)


class ListOpsDataModule(SyntheticDataModule):
    """Expressions such as ``[MAX 2 9 [MIN 4 7 ] 0 ]`` of at most ``max_length`` tokens and ``max_depth`` nested
    operators, each with 2 to ``max_args`` arguments (an argument is a nested operator with probability
    ``nest``); the label is the value (0-9). Tokens are padded with ``[pad]`` (id 0) at the end.
    ``chance``: the best majority guess by length and outer operator (:mod:`attnexp.data.priors`).
    """

    num_classes = 10

    def __init__(
        self,
        max_depth: int = 4,
        max_args: int = 5,
        max_length: int = 64,
        nest: float = 0.25,
        **splits: Any,
    ) -> None:
        super().__init__(**splits)
        check("data", max_depth=max_depth, max_args=max_args, max_length=max_length)
        if max_args < 2 or max_length < 2 + max_args or not 0 <= nest < 1:
            raise AttnexpError(
                f"data.max_args={max_args}, data.max_length={max_length} and data.nest={nest} cannot make ListOps "
                "expressions: an operator takes at least 2 arguments, the shortest expression with max_args arguments "
                "needs max_args + 2 tokens, and nest is a probability below "
                "1. E.g. data.max_args=5 data.max_length=64 data.nest=0.25."
            )
        self.vocab_size, self.context = len(TOKENS), max_length
        self.max_depth, self.max_args, self.nest = max_depth, max_args, nest

    def generate(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        rng = random.Random(int(torch.randint(0, 2**62, (1,), generator=generator)))
        x, y = torch.zeros(n, self.context, dtype=torch.long), torch.zeros(n, dtype=torch.long)
        for i in range(n):
            ids: list[int] = []
            while not 0 < len(ids) <= self.context:  # a draw too long for max_length is drawn again
                e = expression(rng, 1, self.max_depth, self.max_args, self.nest)
                ids = [IDS[t] for t in tokens(e)]
            x[i, : len(ids)], y[i] = torch.tensor(ids), value(e)
        return x, y
