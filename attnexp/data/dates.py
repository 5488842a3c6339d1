"""Dates as people write them, in Spanish and English, to translate into ISO ``YYYY-MM-DD`` (character level)."""

from __future__ import annotations

import datetime
from typing import Any

import torch

from attnexp.data.date_formats import formats_for, render
from attnexp.data.seq2seq import Seq2SeqDataModule, encode_rows
from attnexp.data.splits import SPLITS, DealtSplits
from attnexp.errors import AttnexpError
from attnexp.tokens import SEQ2SEQ_SPECIALS


class DatesDataModule(Seq2SeqDataModule, DealtSplits):
    """Every date from ``first_year``-01-01 to ``last_year``-12-31 is one possible example. The dates are shuffled
    once with ``split_seed`` and dealt to test, val and train, so no val or test date occurs in training (in any
    format); each example writes its date in a format drawn from the seed (:mod:`attnexp.data.date_formats`:
    numeric formats day first, two-digit years only when the range spans at most 100 years). Source and
    target are characters; the vocabularies come from the training examples. The target reorders the
    source (day, month, year to year, month, day), so the cross-attention must learn a non-monotonic alignment.
    """

    def __init__(self, first_year: int = 1950, last_year: int = 2049, **splits: Any) -> None:
        super().__init__(**splits)
        if not 1 <= first_year <= last_year <= 9999:
            raise AttnexpError(
                f"data.first_year={first_year} and data.last_year={last_year} must satisfy 1 <= first_year "
                "<= last_year <= 9999, e.g. data.first_year=1950 data.last_year=2049."
            )
        self.first, self.last = datetime.date(first_year, 1, 1), datetime.date(last_year, 12, 31)
        self.formats = formats_for(first_year, last_year)
        days = (self.last - self.first).days + 1
        if sum(self.sizes.values()) > days:
            raise AttnexpError(
                "data.train_size + val_size + test_size = "
                f"{sum(self.sizes.values())} examples need as many different dates, "
                f"but {first_year}-{last_year} has {days}: each date is "
                "used once, so that no val or test date is seen in "
                "training. Widen the range (data.first_year, data.last_year) or use fewer examples."
            )
        self.days = days

    def build(self) -> None:
        generator = torch.Generator().manual_seed(self.split_seed)
        order = torch.randperm(self.days, generator=generator).tolist()
        fmt = torch.randint(len(self.formats), (sum(self.sizes.values()),), generator=generator).tolist()
        text, start = {}, 0
        for split in ("test", "val", "train"):  # test and val first: their dates do not depend on train_size
            picked = range(start, start + self.sizes[split])
            dates = [self.first + datetime.timedelta(days=order[i]) for i in picked]
            text[split] = [(render(d, self.formats[fmt[i]]), d.isoformat()) for i, d in zip(picked, dates)]
            start += self.sizes[split]
        self.src_vocab = self.vocabulary(
            "src_vocab", [c for s, _ in text["train"] for c in s], "char", SEQ2SEQ_SPECIALS
        )
        self.tgt_vocab = self.vocabulary(
            "tgt_vocab", [c for _, t in text["train"] for c in t], "char", SEQ2SEQ_SPECIALS
        )
        self.src_len = max(len(s) for pairs in text.values() for s, _ in pairs)
        self.tgt_len = 10 + 2  # YYYY-MM-DD with [bos] and [eos]
        self.examples = text
        self.splits = {
            split: (
                encode_rows([s for s, _ in text[split]], self.src_vocab, self.src_len, bos_eos=False),
                encode_rows([t for _, t in text[split]], self.tgt_vocab, self.tgt_len, bos_eos=True),
            )
            for split in SPLITS
        }
