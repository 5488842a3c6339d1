"""Next-token prediction scored at the answer positions only (the recall, copy and sequence tasks)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torchmetrics import Metric
from torchmetrics.classification import MulticlassAccuracy, MulticlassExactMatch

from attnexp.rules import check
from attnexp.tasks.base import Forward, PartlyScored
from attnexp.tokens import NO_TARGET


def answer_slots(target: Tensor) -> Tensor:
    """Each row's answer positions in order, padded to the most answers of a row with unscored positions.  # (B, A)"""
    unscored = (target == NO_TARGET).to(torch.uint8)  # (B, L)
    most = target.shape[1] - int(unscored.sum(1).min())
    return unscored.argsort(dim=1, stable=True)[:, :most]


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


class AnswerTokens(PartlyScored):
    """Cross-entropy of the next token at the answer positions only (targets elsewhere are ``NO_TARGET``).

    Metrics: ``acc`` per answer token and ``seq_acc`` per sequence (every answer right); on the test split
    also ``acc@len=N`` for each of ``lengths``, over the sequences with N answer tokens (length
    generalisation). Best checkpoint by ``val/acc``. Figure: each head's attention from the answer positions of a
    validation sequence over its last ``max_tokens`` tokens up to its last answer (where recall looks).
    """

    summary: ClassVar[dict[str, str]] = {"test/acc": "max", "test/seq_acc": "max", "val/acc_best": "max"}
    causal: ClassVar[bool] = True

    def __init__(
        self, monitor: str = "val/acc", mode: str = "max", lengths: Sequence[int] | None = None, max_tokens: int = 32
    ) -> None:
        super().__init__(monitor, mode)
        check("task", max_tokens=max_tokens)
        self.lengths, self.max_tokens = [int(n) for n in lengths or ()], max_tokens

    def forward(self, net: nn.Module, x: Tensor, y: Tensor | None = None, need_weights: bool = False) -> Any:
        """With targets, the logits at the answer positions only (:func:`answer_slots`)."""
        if y is None or need_weights:
            return super().forward(net, x, y, need_weights)
        return net(x, at=answer_slots(y))

    def loss(self, logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The mean loss over answers, with the logits and the targets at the answer slots.  # (B, A, V), (B, A)
        ``logits`` are those of :meth:`forward` (B, A, V), or of every position (B, L, V)."""
        slots = answer_slots(target)  # (B, A)
        if logits.shape[1] != slots.shape[1]:
            logits = logits.gather(1, slots.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))
        return super().loss(logits, target.gather(1, slots))

    def scored(self, splits: Mapping[str, tuple[Any, Tensor]]) -> dict[str, dict[str, int]]:
        """``acc`` counts answer tokens, ``seq_acc`` sequences, ``acc@len=N`` the answer tokens of the test sequences
        with N answers."""
        found = {}
        for split, (_, y) in splits.items():
            answers = (y != NO_TARGET).sum(1)  # (N,)
            found[split] = {"acc": int(answers.sum()), "seq_acc": len(y)}
            if split == "test":
                found[split].update({f"acc@len={n}": int(answers[answers == n].sum()) for n in self.lengths})
        return found

    def metrics(self, num_classes: int, stage: str = "val") -> dict[str, Metric]:
        found: dict[str, Metric] = {"acc": AnswerAccuracy(num_classes), "seq_acc": SequenceExact(num_classes)}
        if stage == "test":
            found.update({f"acc@len={n}": AnswerAccuracy(num_classes, answers=n) for n in self.lengths})
        return found

    def figures(self, forward: Forward, datamodule: Any) -> dict[str, Any]:
        """``figures/attention``: the first validation sequence's attention at its answer positions (queries down)
        over its last ``max_tokens`` tokens up to the last answer (keys across); later keys in grey."""
        from attnexp.figures.tokens import token_attention_figure

        x, y = (getattr(datamodule, "splits", None) or {}).get("val") or (None, None)
        if x is None or y is None or y.dim() != 2:
            return {}
        answers = (y[0] != NO_TARGET).nonzero().flatten().tolist()
        if not answers:
            return {}
        end = answers[-1] + 1
        start = max(0, end - self.max_tokens)
        _, maps = forward(x[:1, :end])  # the prefix up to the last answer: a causal network sees no more
        if not any(m is not None for m in maps):
            return {}
        window = [m[0, ..., start:end, start:end].cpu() if m is not None else None for m in maps]
        later = torch.ones(end - start, end - start, dtype=torch.bool).triu(1)
        tokens = [str(t) for t in x[0, start:end].tolist()]
        rows = [a - start for a in answers if a >= start]
        return {"figures/attention": token_attention_figure(tokens, window, masked=later, rows=rows)}
