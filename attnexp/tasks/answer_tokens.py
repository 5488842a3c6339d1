"""Next-token prediction scored at the answer positions only (the recall, copy and sequence tasks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch.nn.functional as F
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.classification import MulticlassAccuracy, MulticlassExactMatch

from attnexp.data.synthetic import NO_TARGET
from attnexp.tasks.base import Task


class AnswerAccuracy(MulticlassAccuracy):
    """Share of answer tokens predicted exactly; positions targeted ``NO_TARGET`` are not counted.
    Takes logits (B, L, V) and targets (B, L); with ``answers`` only sequences with that many answers."""

    def __init__(self, num_classes: int, answers: int | None = None) -> None:
        super().__init__(num_classes, average="micro", ignore_index=NO_TARGET)
        self.answers = answers

    def update(self, logits: Tensor, target: Tensor) -> None:
        if self.answers is not None:
            kept = (target != NO_TARGET).sum(1, keepdim=True) == self.answers  # (B, 1)
            target = target.where(kept, NO_TARGET)
        super().update(logits.transpose(1, 2), target)  # (B, V, L): the class axis second


class SequenceExact(MulticlassExactMatch):
    """Share of sequences whose every answer token is right."""

    def __init__(self, num_classes: int) -> None:
        super().__init__(num_classes, ignore_index=NO_TARGET)

    def update(self, logits: Tensor, target: Tensor) -> None:
        super().update(logits.transpose(1, 2), target)


class AnswerTokens(Task):
    """Cross-entropy of the next token at the answer positions only (targets elsewhere are ``NO_TARGET``).

    Metrics: ``acc`` per answer token and ``seq_acc`` per sequence (every answer right); on the test split
    also ``acc@len=N`` for each of ``lengths``, over the sequences with N answer tokens (length
    generalisation). Best checkpoint by ``val/acc``.
    """

    summary: ClassVar[dict[str, str]] = {"test/acc": "max", "test/seq_acc": "max", "val/acc_best": "max"}

    def __init__(self, monitor: str = "val/acc", mode: str = "max", lengths: Sequence[int] | None = None) -> None:
        super().__init__(monitor, mode)
        self.lengths = [int(n) for n in lengths or ()]

    def loss(self, logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The mean loss over answers, with the logits and targets as they are.  # (B, L, V), (B, L)"""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=NO_TARGET), logits, target

    def count(self, target: Tensor) -> Tensor:
        return (target != NO_TARGET).sum()

    def metrics(self, num_classes: int, stage: str = "val") -> dict[str, Metric]:
        found: dict[str, Metric] = {"acc": AnswerAccuracy(num_classes), "seq_acc": SequenceExact(num_classes)}
        if stage == "test":
            found.update({f"acc@len={n}": AnswerAccuracy(num_classes, answers=n) for n in self.lengths})
        return found
