"""Next-token data from a UTF-8 text file: tokenise, split by position, cut into windows."""

from __future__ import annotations

import codecs
import os
from pathlib import Path
from typing import Any

from torch import Tensor
from torch.utils.data import DataLoader

from attnexp.data.splits import SplitLoaders
from attnexp.data.tensor_loader import RandomStarts, StreamWindows, training_device
from attnexp.data.vocabulary import Vocabulary, check_level, tokenize
from attnexp.errors import AttnexpError
from attnexp.rules import check
from attnexp.tokens import BOS, EOS


def read_text(path: str, data: str = "text", example: str = "book.txt") -> str:
    """The file's text, or an :class:`AttnexpError` saying why it cannot serve as ``data=<data>``'s file."""
    file = Path(path).expanduser()
    try:
        raw = file.read_bytes()
    except OSError as err:
        raise AttnexpError(
            f"Cannot read data.path={path} ({err.strerror or type(err).__name__}; looked at {file.resolve()}). "
            f"data={data} needs a readable UTF-8 text file: check the path (a relative path starts from the "
            f"folder you run in, {os.getcwd()}) and its permissions, e.g. data.path=/abs/path/{example}."
        ) from err
    if raw[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        raise AttnexpError(
            f"data.path={path} is UTF-16 text; data={data} reads UTF-8 only. Convert it first, e.g. "
            f"`iconv -f utf-16 -t utf-8 {path} > {file.stem}.utf8{file.suffix}`, and point data.path at the result."
        )
    if looks_binary(raw):
        raise AttnexpError(
            f"data.path={path} is not a text file: its first bytes hold NUL or other control bytes that text does not "
            f"have (an image, archive, model or other binary file?). data={data} learns from UTF-8 text; point "
            f"data.path at a text file, e.g. data.path=/abs/path/{example}."
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        at = err.start + (
            len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
        )  # the error counts after a BOM
        line = raw[:at].count(b"\n") + 1
        raise AttnexpError(
            f"data.path={path} is not UTF-8 text: byte {at} (line {line}) is 0x{raw[at]:02x}, which UTF-8 "
            f"does not allow there. data={data} reads UTF-8 only; convert the file first, e.g. "
            f"`iconv -f latin1 -t utf-8 {path} > {file.stem}.utf8{file.suffix}`, and point data.path at the result."
        ) from err
    if not text.strip():
        raise AttnexpError(
            f"data.path={path} is empty{' (only whitespace)' if text else ''}: there is nothing to learn from. "
            "Point data.path at a UTF-8 text file with at least a few "
            f"thousand {'lines' if data == 'pairs' else 'characters'}."
        )
    return text


def looks_binary(raw: bytes) -> bool:
    """Whether a file's first 64 KiB look like binary data: a NUL byte, or more than 1 in 20 control bytes other than
    tabs, line and page breaks (converting such a file to UTF-8 would make it no text to learn from)."""
    head = raw[:65536]
    control = sum(head.count(bytes([b])) for b in range(32) if b not in (9, 10, 12, 13))
    return b"\x00" in head or control > len(head) / 20


def split_fractions(val_fraction: float, test_fraction: float) -> tuple[float, float, float]:
    """The train, val and test shares of a file split by position, or an error for shares that cannot split it."""
    if not (val_fraction > 0 and test_fraction > 0 and val_fraction + test_fraction < 1):
        raise AttnexpError(
            f"data.val_fraction={val_fraction} and data.test_fraction={test_fraction} must each be above 0 and "
            "sum to less than 1: the file is split by position into train, val and test parts. E.g. 0.1 and 0.1."
        )
    return 1.0 - val_fraction - test_fraction, val_fraction, test_fraction


def windows(ids: Tensor, context: int, stride: int) -> tuple[Tensor, Tensor]:
    """Inputs and next-token targets of every window, as views of ``ids``.  # (N,) -> (W, T), (W, T)"""
    cut = ids.unfold(0, context + 1, stride)  # (W, T+1)
    return cut[:, :-1], cut[:, 1:]


class TextDataModule(SplitLoaders):
    """A text file as next-token windows: train, val and test are consecutive parts of the text.

    Tokens are words and punctuation marks (``level=word``) or characters
    (``level=char``). The vocabulary comes from the training part only; later
    tokens it lacks become ``[unk]``. Each window holds ``context`` tokens and
    the targets are the same window shifted by one. Training windows start
    every ``stride`` tokens (default: ``context``, no overlap), or with ``windows`` an
    epoch is that many windows at random starts, drawn anew each epoch (as GPT training samples
    its batches); val/test windows never overlap. The text is read and split on first use of
    :attr:`spec`.
    """

    def __init__(
        self,
        path: str | None = None,
        level: str = "word",
        context: int = 64,
        stride: int | None = None,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        batch_size: int = 64,
        eval_batch_size: int = 256,
        windows: int | None = None,
    ) -> None:
        super().__init__(batch_size, eval_batch_size)
        check_level(level)
        check("data", context=context, stride=stride, windows=windows)
        self.windows = windows
        stride = context if stride is None else stride
        self.path, self.level, self.context, self.stride = path, level, context, stride
        self.fractions = split_fractions(val_fraction, test_fraction)
        self.vocab: Any = None  # a Vocabulary, built or restored in setup
        self.streams: dict[str, Tensor] = {}  # token ids of each part  # (N,)

    @property
    def spec(self) -> dict[str, int]:
        """Shape facts the language model is built from."""
        self.setup()
        return {"vocab_size": len(self.vocab), "context": self.context}

    def files(self) -> dict[str, Path]:
        """The file a run reads, by its name (a run's data identity); the built-in corpus reads none."""
        return {Path(self.path).name: Path(self.path).expanduser()} if self.path else {}

    def read_tokens(self) -> list[str]:
        if self.path is None:
            raise AttnexpError("data=text needs a file: add data.path=/path/to/file.txt (any UTF-8 text).")
        return tokenize(read_text(self.path), self.level)

    def split_tokens(self, tokens: list[str]) -> dict[str, list[str]]:
        """Train, val and test parts by position, each long enough for one window."""
        n = len(tokens)
        n_train, n_val = int(n * self.fractions[0]), int(n * self.fractions[1])
        parts = {"train": tokens[:n_train], "val": tokens[n_train : n_train + n_val], "test": tokens[n_train + n_val :]}
        self.check_context(parts, n)
        return parts

    def check_context(self, parts: dict[str, list[str]], total: int) -> None:
        """Every part must hold one window and the token after it."""
        shortest = min(len(p) for p in parts.values())
        if shortest >= self.context + 1:
            return
        sizes = " / ".join(f"{k} {len(p)}" for k, p in parts.items())
        fix = f"data.context<={shortest - 1}, " if shortest > 1 else ""
        raise AttnexpError(
            f"data.context={self.context} is longer than the text allows: {self.path} has {total} {self.level} "
            f"tokens (train / val / test: {sizes}), and every part needs context + 1 = {self.context + 1} "
            f"tokens (a window and the token after it). Use {fix}{self.more_tokens_hint()}."
        )

    def more_tokens_hint(self) -> str:
        """How to get more tokens, for the message about a context that is too long."""
        return f"a longer text{', or data.level=char (more tokens from the same text)' if self.level == 'word' else ''}"

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        parts = self.split_tokens(self.read_tokens())
        if self.vocab is None:  # else restored from a checkpoint
            self.vocab = Vocabulary.build(parts["train"], self.level)
        self.streams = {name: self.vocab.encode(part)[0] for name, part in parts.items()}
        self.splits = {
            name: windows(ids, self.context, self.stride if name == "train" else self.context)
            for name, ids in self.streams.items()
        }

    def train_dataloader(self) -> DataLoader:
        if self.windows is None:
            return super().train_dataloader()
        stream = self.streams["train"]
        device = training_device(self)
        sampler = RandomStarts(self.windows, len(stream) - self.context, self.batch_size, device=device)
        return DataLoader(StreamWindows(stream.to(device), self.context), sampler=sampler, batch_size=None)

    def validation_sample(self, max_tokens: int) -> Tensor:
        """A validation sentence for figures: from the first ``[bos]`` to its ``[eos]``, else the start.  # (L,)"""
        ids = self.streams["val"]
        bos, eos = self.vocab.ids.get(BOS), self.vocab.ids.get(EOS)
        start = (ids == bos).nonzero()[:1].flatten().tolist() if bos is not None else []
        ids = ids[start[0] :] if start else ids
        end = (ids == eos).nonzero()[:1].flatten().tolist() if eos is not None else []
        return ids[: min(max_tokens, self.context, end[0] + 1 if end else len(ids))]

    def state_dict(self) -> dict[str, Any]:
        """The vocabulary travels in every checkpoint, so ``attnexp-predict`` needs no text file."""
        return {**self.vocab.state_dict(), "context": self.context} if self.vocab else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state and not self.splits:
            self.vocab = Vocabulary.from_state(state)
