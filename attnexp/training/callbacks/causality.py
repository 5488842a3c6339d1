"""The check that a causal task's trained network reads no later token: a mixer's leak that its initial parameters
hid (a convolution over the keys that starts as the identity) shows once training has moved them, and a run that
learnt to read the next token scores well by reading the answer."""

from __future__ import annotations

import functools
from typing import Any

import pytorch_lightning as pl
import torch
from torch import Tensor, nn

from attnexp.mixers import is_mixer
from attnexp.mixers.conformance.kit import relative
from attnexp.mixers.contract import where_defined
from attnexp.training.callbacks.figures import evaluated

TOLERANCE = {"32": 1e-4, "16": 1e-2}  # an earlier logit's relative change allowed: rounding, in 32 or 16 bits


class CausalityCheck(pl.Callback):
    """After training, on the weights the run reports (those the test measures; the last ones with ``test`` false),
    changes the tokens of one validation batch (its first ``samples`` sequences) from a position on, another one in
    each sequence, and holds every logit before it to what it was. A network whose earlier logits move reads later
    tokens: the run's record says ``invalid`` and names the first mixer whose outputs moved while its inputs did not.
    For causal tasks only (``task.causal``); in eval mode, without gradients, the random state restored: no weight,
    metric or later number of the run changes. The result is the record's ``causality``."""

    def __init__(self, record: Any = None, test: bool = True, samples: int = 8) -> None:
        self.record, self.test, self.samples = record, test, samples

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if not self.test:
            self.check(trainer, pl_module, "the last weights")

    def on_test_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.check(trainer, pl_module, "the weights tested")

    def check(self, trainer: pl.Trainer, pl_module: Any, weights: str) -> None:
        datamodule = getattr(trainer, "datamodule", None)
        if self.record is None or datamodule is None or not getattr(pl_module.task, "causal", False):
            return
        devices = [pl_module.device] if pl_module.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # a loader's iterator draws a seed: training's stay as they were
            x = next(iter(datamodule.val_dataloader()))[0][: self.samples]
            tolerance = TOLERANCE["16" if "16" in str(trainer.precision) else "32"]
            found = leak(pl_module, x.to(pl_module.device), tolerance)
        self.record.fields["causality"] = {"weights": weights, "tolerance": tolerance, **found}


def leak(pl_module: Any, x: Tensor, tolerance: float) -> dict[str, Any]:
    """The largest relative change of a logit before a sequence's changed tokens (token ids ``x`` (B, L)), and, where
    it passes ``tolerance``, ``leak`` with ``error`` naming the first mixer that let the later tokens in."""
    changed, cuts = later_tokens_changed(x, pl_module.net.num_classes)
    mixers = [m for m in pl_module.net.modules() if is_mixer(m)]
    calls: dict[nn.Module, list[list[Tensor]]] = {m: [] for m in mixers}
    hooks = [m.register_forward_hook(functools.partial(keep, calls[m]), with_kwargs=True) for m in mixers]
    try:
        logits = [evaluated(pl_module, tokens) for tokens in (x, changed)]
    finally:
        for hook in hooks:
            hook.remove()
    change = earlier_change(logits[0], logits[1], cuts)
    found: dict[str, Any] = {"largest_change": change, "leak": change > tolerance}
    if found["leak"]:
        where = next(
            (
                f"layer {i}, {where_defined(m, None)}"
                for i, m in enumerate(mixers)
                if len(calls[m]) == 2
                and earlier_change(calls[m][0][0], calls[m][1][0], cuts) <= tolerance
                and earlier_change(calls[m][0][1], calls[m][1][1], cuts) > tolerance
            ),
            "no single mixer",
        )
        found["error"] = (
            f"the trained network reads later tokens: changing a sequence's tokens from one position on moved the "
            f"logits before it by {change:.3g} (relative; rounding allows {tolerance:g}); the first mixer whose "
            f"outputs moved while its inputs did not: {where}. Its numbers measure a model that sees what it "
            "predicts. attnexp-check with this model= and data= names the line where the later token comes in."
        )
    return found


def later_tokens_changed(x: Tensor, vocab: int) -> tuple[Tensor, list[int]]:
    """``x`` (B, L) with every token of sequence b from its cut on replaced by the next id, the cuts spread from 1 to
    L - 1 over the batch."""
    b, length = x.shape
    cuts = [1 + i * max(length - 2, 0) // max(b - 1, 1) for i in range(b)]
    later = torch.arange(length, device=x.device) >= torch.tensor(cuts, device=x.device)[:, None]  # (B, L)
    return torch.where(later, (x + 1) % vocab, x), cuts


def earlier_change(before: Tensor, after: Tensor, cuts: list[int]) -> float:
    """The largest relative change of sequence b's values (B, L, ...) before its cut."""
    return max(relative(after[b, :cut], before[b, :cut]) for b, cut in enumerate(cuts))


def keep(calls: list[list[Tensor]], mixer: nn.Module, args: tuple, kwargs: dict, out: Any) -> None:
    """A forward hook's record of a mixer's call: its tokens and its output."""
    calls.append([(args[0] if args else kwargs["x"]).detach(), out[0].detach()])
