"""Tokenising text at word or character level, and the token <-> id vocabulary."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

from attnexp.errors import AttnexpError
from attnexp.tokens import EOS_ID, PAD_ID, UNK

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
    """Token <-> id map: the special tokens first (``[unk]`` alone by default, so id 0), then the rest by
    falling frequency, ties alphabetically. Unknown tokens map to ``[unk]``."""

    def __init__(self, tokens: list[str], level: str) -> None:
        check_level(level)
        if UNK not in tokens:
            raise ValueError(f"a vocabulary holds {UNK}, got {tokens[:3]}.")
        self.tokens, self.level = list(tokens), level
        self.ids = {token: i for i, token in enumerate(self.tokens)}
        self.unk_id = self.ids[UNK]

    @classmethod
    def build(cls, tokens: Iterable[str], level: str, specials: tuple[str, ...] = (UNK,)) -> Vocabulary:
        """Vocabulary of ``specials`` (which must hold ``[unk]``), then every other distinct token in ``tokens``."""
        counts = Counter(tokens)
        for special in specials:
            counts.pop(special, None)
        return cls([*specials, *sorted(counts, key=lambda t: (-counts[t], t))], level)

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: Iterable[str]) -> tuple[Tensor, list[str]]:
        """Ids of ``tokens`` (unknown ones -> ``[unk]``) and the list of unknown tokens.  # (N,)"""
        tokens = list(tokens)
        ids = [self.ids.get(t, self.unk_id) for t in tokens]
        unknown = [t for t, i in zip(tokens, ids) if i == self.unk_id and t != UNK]
        return torch.tensor(ids, dtype=torch.long), unknown

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.tokens[i] for i in ids]

    def text(self, ids: Iterable[int]) -> str:
        """A decoded output as text: the tokens up to its first ``[eos]``, ``[pad]`` left out."""
        ids = list(ids)
        ids = ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids
        return detokenize(self.decode([i for i in ids if i != PAD_ID]), self.level)

    def state_dict(self) -> dict[str, Any]:
        return {"vocab": self.tokens, "level": self.level}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Vocabulary:
        return cls(state["vocab"], state["level"])
