"""The task: what a run predicts and how it is measured."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torchmetrics import Metric
from torchmetrics.classification import MulticlassAccuracy

from attnexp.errors import AttnexpError
from attnexp.tokens import NO_TARGET

# forward(x) -> (logits, per-layer attention weights), in eval mode without gradients (figures use it)
Forward = Callable[[Tensor], "tuple[Tensor, list[Tensor | None]]"]
MODES = ("min", "max")


class Task:
    """Owns what differs between kinds of task: how the network is called, the loss, the metrics, the metric
    and mode that pick the best checkpoint (later epochs win ties), and the figures. The training module
    (:class:`attnexp.training.module.TaskModule`) asks it for each.

    The base is cross-entropy over the last axis of the logits, every leading axis flattened
    (one prediction per image, or per token), measured by loss and accuracy. ``summary`` names the
    metrics a comparison reports, each with its better direction (``max`` or ``min``); ``causal`` says that each
    position predicts from the tokens before it only (the next-token tasks: the trained network is checked for a leak,
    :mod:`attnexp.training.callbacks.causality`).
    """

    summary: ClassVar[dict[str, str]] = {"test/acc": "max", "val/acc_best": "max", "test/loss": "min"}
    causal: ClassVar[bool] = False  # True: the logits at a position may depend on the tokens up to it only

    def __init__(self, monitor: str = "val/acc", mode: str = "max") -> None:
        if mode not in MODES:
            raise AttnexpError(f"task.mode={mode!r} is not a direction. Allowed: {', '.join(MODES)}.")
        self.monitor, self.mode = monitor, mode

    def bind(self, datamodule: Any) -> None:
        """Called with the data module before training or testing; a task that needs the data (a vocabulary, say)
        keeps it."""

    def forward(self, net: nn.Module, x: Tensor, y: Tensor | None = None, need_weights: bool = False) -> Any:
        """The network's logits for inputs ``x`` (and, with ``need_weights``, each layer's weights); ``y``, the
        targets, is for tasks whose network reads them too (teacher forcing)."""
        return net(x, need_weights=True) if need_weights else net(x)

    def loss(self, logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The mean loss, and the logits and targets it was computed on, one row per prediction.  # (N, K), (N,)"""
        logits, target = logits.reshape(-1, logits.shape[-1]), target.reshape(-1)
        return F.cross_entropy(logits, target), logits, target

    def count(self, target: Tensor) -> int | Tensor:
        """How many targets the loss averages over: all of them here (a Python int, known without a sync);
        a task that leaves some out counts on the device (a tensor)."""
        return target.numel()

    def scored(self, splits: Mapping[str, tuple[Any, Tensor]]) -> dict[str, dict[str, int]]:
        """Per split (``{name: (inputs, targets)}``), how many predictions each accuracy counts: the units its margin
        is measured in (a token of a next-token window, not the window). Here every target: one per image, one per
        token."""
        return {split: {"acc": int(y.numel())} for split, (_, y) in splits.items()}

    def metrics(self, num_classes: int, stage: str = "val") -> dict[str, Metric]:
        """Fresh metrics for one evaluation stage (``val`` or ``test``), each updated with ``(logits, target)`` of
        :meth:`loss`; logged as ``<stage>/<name>`` beside ``<stage>/loss``."""
        return {"acc": MulticlassAccuracy(num_classes, average="micro")}

    def update(
        self, metrics: Mapping[str, Metric], logits: Tensor, target: Tensor, net: nn.Module, x: Tensor, stage: str
    ) -> None:
        """Update a stage's metrics with one evaluation batch: ``logits`` and ``target`` as :meth:`loss` returned
        them; the network and the inputs ``x`` for a task that measures more than the logits (decoded outputs)."""
        for metric in metrics.values():
            metric.update(logits, target)

    def derived(self, stage: str, loss: Tensor) -> dict[str, Tensor]:
        """Metrics computed from a stage's mean loss (perplexity, say), logged with it."""
        return {}

    def figures(self, forward: Forward, datamodule: Any) -> dict[str, Any]:
        """Matplotlib figures by TensorBoard tag, drawn once at the end of training."""
        return {}

    def logged(self, num_classes: int, stage: str = "val") -> list[str]:
        """The names a stage's end logs: its loss, the metrics and what derives from the loss (validation's are what
        a checkpoint can be chosen by, known before training)."""
        names = [f"{stage}/loss", *(f"{stage}/{name}" for name in self.metrics(num_classes, stage))]
        return names + list(self.derived(stage, torch.zeros(())))


class PartlyScored(Task):
    """A task that scores some targets only: the others are ``NO_TARGET`` (padding, the tokens between answers),
    left out of the loss and of its count."""

    def loss(self, logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The mean cross-entropy over the scored targets, with the logits and targets as given.  # (B, T, V), (B, T)"""
        flat = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=NO_TARGET)
        return flat, logits, target

    def count(self, target: Tensor) -> Tensor:
        return (target != NO_TARGET).sum()
