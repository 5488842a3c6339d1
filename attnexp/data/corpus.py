"""The built-in toy corpus: nine short Spanish sentences, word-level."""

from __future__ import annotations

from attnexp.data.text import TextDataModule
from attnexp.data.vocabulary import tokenize
from attnexp.tokens import BOS, EOS

SENTENCES = (
    "el perro come un hueso",
    "un muchacho jugaba",
    "el muchacho saltaba la cuerda",
    "un perro come croquetas",
    "el perro come",
    "el gato come croquetas",
    "un gato come",
    "un muchacho jugaba con la cuerda",
    "el muchacho jugaba con la cuerda",
)


class CorpusDataModule(TextDataModule):
    """The toy corpus, each sentence wrapped in ``[bos]`` ... ``[eos]``, as one token stream.

    It is far too small to hold anything out, so val and test are the training
    text itself: the numbers say how well the model has learnt the corpus.
    Training windows start at every token (``stride=1``), and an epoch goes
    over them ``repeats`` times so that a few epochs are enough to learn it.
    """

    def __init__(self, context: int = 8, repeats: int = 50, batch_size: int = 64, eval_batch_size: int = 256) -> None:
        super().__init__(None, "word", context, stride=1, batch_size=batch_size, eval_batch_size=eval_batch_size)
        self.repeats = max(1, repeats)
        self.path = "the toy corpus"

    def files(self) -> dict:
        """None: the corpus is part of attnexp's code (a run's data identity is its settings)."""
        return {}

    def more_tokens_hint(self) -> str:
        return "data=text data.path=FILE for a longer text of your own"

    def read_tokens(self) -> list[str]:
        return tokenize(" ".join(f"{BOS} {s} {EOS}" for s in SENTENCES), "word")

    def split_tokens(self, tokens: list[str]) -> dict[str, list[str]]:
        parts = {"train": tokens, "val": tokens, "test": tokens}
        self.check_context(parts, len(tokens))
        return parts

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        super().setup(stage)
        x, y = self.splits["train"]
        self.splits["train"] = (x.repeat(self.repeats, 1), y.repeat(self.repeats, 1))  # (W*repeats, T)
