"""Tokenising text at word or character level, and the token <-> id vocabulary."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

import torch
from torch import Tensor

from attnexp.errors import AttnexpError

UNK, BOS, EOS = "[unk]", "[bos]", "[eos]"
LEVELS = ("word", "char")
# Special tokens, words (with inner apostrophes: "don't"), or single punctuation marks.
WORD_PATTERN = re.compile(r"\[(?:unk|bos|eos)\]|\w+(?:'\w+)*|[^\w\s]")


def check_level(level: str) -> None:
    """Raise a clear error for anything but ``word`` or ``char``."""
    if level not in LEVELS:
        raise AttnexpError(
            f"data.level={level!r} is not a tokenisation level. Allowed: {', '.join(LEVELS)} "
            "(word = words and punctuation marks, char = every character). Set data.level=word or data.level=char."
        )


def tokenize(text: str, level: str) -> list[str]:
    """Words and punctuation marks (``[bos]``-style specials kept whole), or every character."""
    check_level(level)
    return list(text) if level == "char" else WORD_PATTERN.findall(text)


def detokenize(tokens: Iterable[str], level: str) -> str:
    """Tokens back to text: characters joined as they are, words with spaces."""
    return ("" if level == "char" else " ").join(tokens)


class Vocabulary:
    """Token <-> id map; id 0 is ``[unk]``, the rest by falling frequency, ties alphabetically."""

    def __init__(self, tokens: list[str], level: str) -> None:
        check_level(level)
        if not tokens or tokens[0] != UNK:
            raise ValueError(f"a vocabulary starts with {UNK}, got {tokens[:3]}.")
        self.tokens, self.level = list(tokens), level
        self.ids = {token: i for i, token in enumerate(self.tokens)}

    @classmethod
    def build(cls, tokens: Iterable[str], level: str) -> "Vocabulary":
        """Vocabulary of every distinct token in ``tokens`` plus ``[unk]``."""
        counts = Counter(tokens)
        counts.pop(UNK, None)
        return cls([UNK, *sorted(counts, key=lambda t: (-counts[t], t))], level)

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: Iterable[str]) -> tuple[Tensor, list[str]]:
        """Ids of ``tokens`` (unknown ones -> ``[unk]``) and the list of unknown tokens.  # (N,)"""
        tokens = list(tokens)
        ids = [self.ids.get(t, 0) for t in tokens]
        unknown = [t for t, i in zip(tokens, ids) if i == 0 and t != UNK]
        return torch.tensor(ids, dtype=torch.long), unknown

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.tokens[i] for i in ids]

    def state_dict(self) -> dict[str, Any]:
        return {"vocab": self.tokens, "level": self.level}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Vocabulary":
        return cls(state["vocab"], state["level"])
