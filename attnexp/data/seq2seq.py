"""The base of the sequence-to-sequence data: (source, target) pairs held whole as tensors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from attnexp.data.splits import SplitLoaders
from attnexp.data.vocabulary import Vocabulary
from attnexp.errors import AttnexpError
from attnexp.tokens import BOS_ID, EOS_ID, PAD_ID


def encode_rows(rows: Sequence[Sequence[str]], vocab: Vocabulary, length: int, bos_eos: bool) -> Tensor:
    """Rows of tokens as ids in one tensor (unknown tokens as ``[unk]``), ``[pad]`` after each; with ``bos_eos``
    wrapped in ``[bos]`` ... ``[eos]``.  # (N, length)"""
    ids, unk = vocab.ids, vocab.unk_id
    out = []
    for row in rows:
        coded = [ids.get(t, unk) for t in row]
        coded = [BOS_ID, *coded, EOS_ID] if bos_eos else coded
        out.append(coded + [PAD_ID] * (length - len(coded)))
    return torch.tensor(out, dtype=torch.long)


class Seq2SeqDataModule(SplitLoaders):
    """Splits of ``(source, target)`` tensors. A target is target-vocabulary ids ``[bos] ... [eos]`` then
    ``[pad]`` (id 0) up to ``tgt_len``; a text source is source-vocabulary ids then ``[pad]`` up to ``src_len``
    (subclasses with image sources set ``src_vocab = None`` and describe the images in :attr:`spec`).
    Subclasses implement :meth:`build`, which fills ``splits`` and the vocabularies and lengths; the
    vocabularies travel in checkpoints (``attnexp-predict`` needs no data). The constructor passes its options on:
    batch sizes to :class:`SplitLoaders`, and for a generated set (``class X(Seq2SeqDataModule, DealtSplits)``) the
    split sizes and seed to :class:`~attnexp.data.splits.DealtSplits`.
    """

    src_vocab: Any = None  # Vocabulary (None for image sources), built or restored in setup
    tgt_vocab: Any = None
    src_len: int = 0
    tgt_len: int = 0

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.restored: dict[str, Any] = {}  # vocabularies from a checkpoint, used by build

    def build(self) -> None:
        raise NotImplementedError

    def setup(self, stage: str | None = None) -> None:
        if not self.splits:
            self.build()

    @property
    def spec(self) -> dict[str, int]:
        """Shape facts the encoder-decoder is built from."""
        self.setup()
        return {"src_vocab_size": len(self.src_vocab), "src_len": self.src_len, **self.target_spec}

    @property
    def target_spec(self) -> dict[str, int]:
        return {"tgt_vocab_size": len(self.tgt_vocab), "tgt_len": self.tgt_len}

    def source_tokens(self, src: Tensor) -> list[str]:
        """A text source's tokens, without padding (figure labels)."""
        return self.src_vocab.decode([i for i in src.tolist() if i != PAD_ID])

    def vocabulary(self, name: str, tokens: Sequence[str], level: str, specials: tuple[str, ...]) -> Vocabulary:
        """The vocabulary ``name`` (``src_vocab``, ``tgt_vocab``) restored from a checkpoint, else built from
        ``tokens``."""
        state = self.restored.get(name)
        return Vocabulary.from_state(state) if state else Vocabulary.build(tokens, level, specials)

    def state_dict(self) -> dict[str, Any]:
        if not self.splits:
            return {}
        state = {"spec": self.spec, "tgt_vocab": self.tgt_vocab.state_dict()}
        return {**state, "src_vocab": self.src_vocab.state_dict()} if self.src_vocab else state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Before the data is built, its vocabularies come from the checkpoint; after, they must be the checkpoint's."""
        if not state:
            return
        if not self.splits:
            self.restored = state
            return
        found = self.state_dict()
        changed = [key for key in ("spec", "src_vocab", "tgt_vocab") if state.get(key) != found.get(key)]
        if changed:
            raise AttnexpError(
                "The data no longer matches the checkpoint: its "
                f"{', '.join(changed)} differ from what the checkpoint was "
                "trained with (a changed data file or data setting). Resume or test with the data and settings of the "
                "training run, or start a new run."
            )
