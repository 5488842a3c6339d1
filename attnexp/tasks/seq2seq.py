"""Sequence to sequence: translation and captioning with an encoder-decoder (:class:`~attnexp.networks.Seq2Seq`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import MeanMetric, Metric

from attnexp.errors import AttnexpError
from attnexp.networks.decoding import beam_search, greedy, trim
from attnexp.rules import check
from attnexp.tasks.answer_tokens import AnswerAccuracy
from attnexp.tasks.base import Forward, PartlyScored
from attnexp.tokens import BOS_ID, EOS_ID, NO_TARGET, PAD_ID

TEXT_METRICS = {"cer": "min", "bleu": "max"}  # name -> better direction


def text_metric(name: str) -> Metric:
    """torchmetrics' character error rate or corpus BLEU (4-grams, on whitespace-separated words)."""
    from torchmetrics.text import BLEUScore, CharErrorRate

    return CharErrorRate() if name == "cer" else BLEUScore()


def same_sequences(pred: Tensor, ref: Tensor) -> Tensor:
    """Whether each decoded sequence equals its reference, both ``[pad]`` after ``[eos]``.  # (B, Tp), (B, Tr) ->
    (B,)"""
    width = max(pred.shape[1], ref.shape[1])
    pred, ref = (F.pad(t, (0, width - t.shape[1]), value=PAD_ID) for t in (pred, ref))
    return (pred == ref).all(-1)


class Seq2SeqTask(PartlyScored):
    """Teacher-forced cross-entropy of every target token after ``[bos]``, padding left out; also logs
    perplexity ``<stage>/ppl``. The network reads the sources and the targets shifted right.

    Metrics: token accuracy ``acc`` (teacher-forced), and on outputs decoded greedily, batched, up to the
    trained target length: ``exact`` (the share of whole sequences right) and ``text_metric``, the
    character error rate ``cer`` or corpus ``bleu`` of the decoded text against the reference (after the
    data's vocabulary: an out-of-vocabulary reference word counts as ``[unk]``). ``beam`` > 1 decodes the
    test split by beam search instead. Best checkpoint by ``val/exact``. Figures: the last decoder block's
    cross-attention per head (target tokens x source tokens) for ``num_examples`` validation examples, or
    for images the caption (red where wrong) and, per word, its attention over the image as a heat overlay
    (``se`` has no attention to draw: its captions alone).
    """

    def __init__(
        self,
        monitor: str = "val/exact",
        mode: str = "max",
        text_metric: str = "cer",
        beam: int = 1,
        num_examples: int = 4,
    ) -> None:
        super().__init__(monitor, mode)
        check("task", beam=beam, num_examples=num_examples)
        if text_metric not in TEXT_METRICS:
            raise AttnexpError(
                f"task.text_metric={text_metric!r} is not a text metric. Allowed: {', '.join(TEXT_METRICS)}."
            )
        self.text_metric, self.beam, self.num_examples = text_metric, beam, num_examples
        summary = {"test/exact": "max", f"test/{text_metric}": TEXT_METRICS[text_metric], "test/acc": "max"}
        self.summary = {**summary, "test/ppl": "min"}  # type: ignore[misc]  # the text metric is the instance's
        self.vocab: Any = None  # the target vocabulary, from the data module (bind)

    def bind(self, datamodule: Any) -> None:
        if getattr(datamodule, "tgt_vocab", None) is None:
            raise AttnexpError(
                f"task=seq2seq needs sequence pairs with a target vocabulary, and {type(datamodule).__name__} "
                "has none: use it with data=dates, pairs or captions (they pick it), or drop the task= override."
            )
        self.vocab = datamodule.tgt_vocab

    def forward(self, net: nn.Module, x: Tensor, y: Tensor | None = None, need_weights: bool = False) -> Any:
        """Teacher-forced logits for the targets ``y`` (B, T) (``[bos]`` first); without targets, for the network's
        own greedy output (whose argmax at every position is that output)."""
        if y is None:
            out = greedy(net, x)
            y = torch.cat([torch.full_like(out[:, :1], BOS_ID), out], dim=1)
        return net(x, y[:, :-1], need_weights=need_weights)

    def loss(self, logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The mean loss over target tokens after ``[bos]``; targets returned with padding as ``NO_TARGET``.  # (B,
        T-1, V), (B, T)"""
        return super().loss(logits, target[:, 1:].masked_fill(target[:, 1:] == PAD_ID, NO_TARGET))  # (B, T-1)

    def derived(self, stage: str, loss: Tensor) -> dict[str, Tensor]:
        return {f"{stage}/ppl": loss.exp()}

    def scored(self, splits: Mapping[str, tuple[Any, Tensor]]) -> dict[str, dict[str, int]]:
        """``acc`` counts target tokens after ``[bos]``, padding aside; ``exact`` whole sequences."""
        return {split: {"acc": int((y[:, 1:] != PAD_ID).sum()), "exact": len(y)} for split, (_, y) in splits.items()}

    def metrics(self, num_classes: int, stage: str = "val") -> dict[str, Metric]:
        return {
            "acc": AnswerAccuracy(num_classes),
            "exact": MeanMetric(),
            self.text_metric: text_metric(self.text_metric),
        }

    def decode(self, net: nn.Module, x: Tensor, beam: int = 1) -> Tensor:
        """The network's output ids (B, T) for sources ``x``: greedy, or the best of a beam search."""
        return greedy(net, x) if beam == 1 else beam_search(net, x, beam)[0][:, 0]

    def texts(self, ids: Tensor) -> list[str]:
        """Each row of ids as text, up to its ``[eos]``."""
        return [self.vocab.text(row) for row in ids.tolist()]

    def update(
        self, metrics: Mapping[str, Metric], logits: Tensor, target: Tensor, net: nn.Module, x: Tensor, stage: str
    ) -> None:
        metrics["acc"].update(logits, target)
        pred = self.decode(net, x, self.beam if stage == "test" else 1)  # (B, T')
        ref = target.masked_fill(target == NO_TARGET, PAD_ID)  # (B, T-1)
        metrics["exact"].update(same_sequences(pred, ref).float())
        hyps, refs = self.texts(pred), self.texts(ref)
        metrics[self.text_metric].update(hyps, [[r] for r in refs] if self.text_metric == "bleu" else refs)

    def figures(self, forward: Forward, datamodule: Any) -> dict[str, Any]:
        from attnexp.figures.alignment import alignment_figure, caption_figure

        x, y = next(iter(datamodule.val_dataloader()))
        x, y = x[: self.num_examples], y[: self.num_examples]
        logits, maps = forward(x)
        pred = trim(logits.argmax(-1).cpu())  # (N, T): the greedy output
        words = [
            self.vocab.decode(row[: row.index(EOS_ID) + 1] if EOS_ID in row else row) for row in pred.tolist()
        ]  # [eos] kept
        last = (
            maps[-1] if maps[-1] is not None and maps[-1].dim() == 4 else None
        )  # the last decoder block's; se: gates (N, C)
        cross = None if last is None else [c[:, : len(w)].cpu() for c, w in zip(last, words)]  # (H, T_i, S)
        if hasattr(datamodule, "as_images"):
            right = same_sequences(pred, y[:, 1:]).tolist()
            return {"figures/captions": caption_figure(datamodule.as_images(x).float(), words, right, cross)}
        if cross is None:
            return {}
        sources = [datamodule.source_tokens(row) for row in x]
        return {
            "figures/cross_attention": alignment_figure(
                sources, words, [c[..., : len(s)] for c, s in zip(cross, sources)]
            )
        }
