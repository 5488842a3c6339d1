"""Sentence pairs from a tab-separated UTF-8 file (``source<TAB>target[<TAB>anything]``), the common format of
parallel-text downloads."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnexp.data.seq2seq import Seq2SeqDataModule, encode_rows
from attnexp.data.splits import SPLITS
from attnexp.data.text import read_text, split_fractions
from attnexp.data.vocabulary import check_level, tokenize
from attnexp.errors import AttnexpError
from attnexp.tokens import SEQ2SEQ_SPECIALS


def read_pairs(path: str, level: str) -> list[tuple[list[str], list[str]]]:
    """The tokens of every source and target, in file order; blank lines are skipped. A line without a tab, or
    with an empty side, is an :class:`AttnexpError` naming it."""
    pairs = []
    for number, line in enumerate(read_text(path, "pairs", "spa-eng.tsv").split("\n"), start=1):
        line = line.removesuffix("\r")  # lines end at newlines only: other line breaks may stand inside a sentence
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise AttnexpError(
                f"data.path={path}, line {number}, has no tab: {line[:60]!r}. data=pairs reads one pair per line, "
                "source<TAB>target (more tab-separated fields are ignored); check that the file is tab-separated, "
                "not comma- or space-separated."
            )
        source, target = tokenize(fields[0].strip(), level), tokenize(fields[1].strip(), level)
        if not source or not target:
            side = "source (before the first tab)" if not source else "target (after the first tab)"
            raise AttnexpError(
                f"data.path={path}, line {number}, has an empty {side}: {line[:60]!r}. Every pair needs text on both "
                "sides; remove or fix the line."
            )
        pairs.append((source, target))
    return pairs


class PairsDataModule(Seq2SeqDataModule):
    """Translation of the pairs of a tab-separated file at word level (words and punctuation marks) or
    character level. The pairs are split by position into train, val and test; the vocabularies come
    from the training part (later tokens they lack become ``[unk]``) and travel in checkpoints. Sources
    and targets are as long as the longest in the file.
    """

    def __init__(
        self,
        path: str | None = None,
        level: str = "word",
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        **loaders: Any,
    ) -> None:
        super().__init__(**loaders)
        check_level(level)
        self.path, self.level = path, level
        self.fractions = split_fractions(val_fraction, test_fraction)

    def files(self) -> dict[str, Path]:
        """The file a run reads, by its name (a run's data identity)."""
        return {Path(self.path).name: Path(self.path).expanduser()} if self.path else {}

    def split(self, pairs: Sequence[Any]) -> dict[str, Sequence[Any]]:
        """Train, val and test parts by position."""
        n_train, n_val = int(len(pairs) * self.fractions[0]), int(len(pairs) * self.fractions[1])
        return {"train": pairs[:n_train], "val": pairs[n_train : n_train + n_val], "test": pairs[n_train + n_val :]}

    def build(self) -> None:
        if self.path is None:
            raise AttnexpError(
                "data=pairs needs a file: add data.path=/path/to/pairs.tsv (UTF-8, one source<TAB>target "
                "pair per line)."
            )
        pairs = read_pairs(self.path, self.level)
        parts = self.split(pairs)
        if not all(parts.values()):
            n, need = len(pairs), next(m for m in range(3, 10**9) if all(self.split(range(m)).values()))
            raise AttnexpError(
                f"data.path={self.path} has {n} pairs, too few to split into train / val / test "
                f"({' / '.join(str(len(p)) for p in parts.values())} with data.val_fraction={self.fractions[1]:g} and "
                f"data.test_fraction={self.fractions[2]:g}): every part "
                "needs at least one pair. Use a file of at least "
                f"{need} pairs (thousands to learn anything), or larger fractions."
            )
        self.src_vocab = self.vocabulary(
            "src_vocab", [t for s, _ in parts["train"] for t in s], self.level, SEQ2SEQ_SPECIALS
        )
        self.tgt_vocab = self.vocabulary(
            "tgt_vocab", [t for _, t in parts["train"] for t in t], self.level, SEQ2SEQ_SPECIALS
        )
        self.src_len = max(len(s) for s, _ in pairs)
        self.tgt_len = max(len(t) for _, t in pairs) + 2  # with [bos] and [eos]
        self.splits = {
            split: (
                encode_rows([s for s, _ in parts[split]], self.src_vocab, self.src_len, bos_eos=False),
                encode_rows([t for _, t in parts[split]], self.tgt_vocab, self.tgt_len, bos_eos=True),
            )
            for split in SPLITS
        }
