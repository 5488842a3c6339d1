"""The certification of a run's trained mechanism, on its own data, at its own length, in the modes it ran: after
training, every mixer of the network on the inputs it receives from one validation batch, in training mode (dropout
off) and in eval mode: a sample's output alone and beside the others of the batch, no later token reaching an earlier
output where the mixer is causal, padded keys invisible where the data pads, finite outputs; and, for a causal task,
the whole network's logits before a changed token. A mixer's leak that its initial parameters hid (a convolution over
the keys that starts as the identity), a batch statistic taken in training only, a chunk boundary that only the run's
length crosses: each shows here, and a run that learnt to read the next token, or whose samples saw each other,
scores what it does not compute."""

from __future__ import annotations

import functools
import time
from typing import Any

import pytorch_lightning as pl
import torch
from torch import Tensor, nn

from attnexp.mixers import is_mixer
from attnexp.mixers.conformance import layout, masks, not_measurable
from attnexp.mixers.conformance.kit import Kit, NotMeasurable, relative
from attnexp.mixers.contract import where_defined
from attnexp.mixers.tracing import traced
from attnexp.training.callbacks.figures import evaluated

TOLERANCE = {"32": 1e-4, "16": 1e-2}  # an earlier logit's relative change allowed: rounding, in 32 or 16 bits


class CausalityCheck(pl.Callback):
    """After training, on the weights the run reports (those the test measures; the last ones with ``test`` false),
    certifies every mixer on one validation batch (its first ``samples`` inputs; :func:`certify`: finite outputs, batch
    independence, no causal leak, padded keys invisible), and for a causal task (``task.causal``) changes the tokens
    of that batch from a position on, another one in each sequence, and holds every logit before it to what it was.
    A mixer that fails a check, or a network whose earlier logits move, makes the run's record say ``invalid``,
    naming the mixer, the check, what was measured and the line of its code. In copies of the mixers, without
    gradients, the random state restored: no weight, metric or later number of the run changes. The results are the
    record's ``certification`` and ``causality``."""

    def __init__(self, record: Any = None, test: bool = True, samples: int = 8) -> None:
        self.record, self.test, self.samples = record, test, samples

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if not self.test:
            self.check(trainer, pl_module, "the last weights")

    def on_test_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.check(trainer, pl_module, "the weights tested")

    def check(self, trainer: pl.Trainer, pl_module: Any, weights: str) -> None:
        datamodule = getattr(trainer, "datamodule", None)
        if self.record is None or datamodule is None:
            return
        started = time.perf_counter()
        devices = [pl_module.device] if pl_module.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # a loader's iterator draws a seed: training's stay as they were
            x = next(iter(datamodule.val_dataloader()))[0][: self.samples]
            tolerance = TOLERANCE["16" if "16" in str(trainer.precision) else "32"]
            certified = certify(pl_module, x, tolerance)
            if getattr(pl_module.task, "causal", False):
                found = leak(pl_module, x.to(pl_module.device), tolerance)
                self.record.fields["causality"] = {"weights": weights, "tolerance": tolerance, **found}
        seconds = round(time.perf_counter() - started, 3)
        checked = {"weights": weights, "tolerance": tolerance, **certified, "seconds": seconds}
        self.record.fields["certification"] = checked


def certify(pl_module: Any, x: Any, tolerance: float) -> dict[str, Any]:
    """The kit's checks on each mixer of ``pl_module``'s network at the inputs it receives from ``x`` (a batch of the
    run's data, through its task, in eval mode): ``passed``, what each check measured per layer, and ``error`` naming
    the first failure."""
    mixers = [m for m in pl_module.net.modules() if is_mixer(m)]
    calls: dict[nn.Module, list[tuple[tuple, dict]]] = {m: [] for m in mixers}
    hooks = [m.register_forward_pre_hook(functools.partial(keep_inputs, calls[m]), with_kwargs=True) for m in mixers]
    try:
        evaluated(pl_module, x)
    finally:
        for hook in hooks:
            hook.remove()
    layers, failed = [], []
    for i, mixer in enumerate(mixers):
        if not calls[mixer]:
            continue
        args, kwargs = calls[mixer][0]
        tokens = (args[0] if args else kwargs["x"]).detach().float()
        given = {k: v.detach() for k, v in kwargs.items() if k in ("context", "mask") and isinstance(v, Tensor)}
        found = certify_mixer(mixer, tokens, given, tolerance)
        layers.append({"layer": i, "mixer": type(mixer).__name__, **found})
        failed += [(i, mixer, name, measured) for name, (ok, measured) in found.items() if ok is False]
    result: dict[str, Any] = {"samples": len(x), "passed": not failed, "layers": layers}
    if failed:
        i, mixer, name, measured = failed[0]
        result["error"] = (
            f"the trained mixers fail their certification on the run's own data: layer {i}, "
            f"{where_defined(mixer, None)}: {name}: {measured}. Its numbers measure a mechanism other than the one "
            "it describes; attnexp-check with this model= and data= checks it at the run's size."
        )
    return result


def certify_mixer(mixer: nn.Module, x: Tensor, given: dict[str, Tensor], tolerance: float) -> dict[str, Any]:
    """Finite outputs, batch independence, no causal leak (for a causal mixer) and padded keys invisible (where the
    call had a padding mask), each in eval and in training mode (dropout off), of copies of ``mixer`` on its call's
    tokens ``x`` (B, L, C) and ``given`` (context, mask): ``{check: (ok, measured)}``, ok None where the check does
    not apply or cannot measure (a NaN: the finiteness check says where it was made)."""
    dtype = next((p.dtype for p in mixer.parameters() if p.is_floating_point()), torch.float32)
    kits = [Kit.on_call(mixer, x.to(dtype), given, tolerance, training) for training in (False, True)]
    found: dict[str, Any] = {"finite outputs": (True, "every output finite, in eval and training mode")}
    for kit in kits:
        built = kit.build()
        with torch.no_grad():
            out = built(kit.x, **kit.given)[0]
        if not torch.isfinite(out).all():
            where = traced(functools.partial(built, kit.x, **kit.given))[0].first_nonfinite(built)
            at = f"; first made at {where.file}:{where.line}, in {where.function}" if where else ""
            found["finite outputs"] = (False, f"NaN or infinite outputs in {mode(kit)} mode{at}")
            break
    causal = getattr(getattr(mixer, "request", None), "causal", False)
    found["batch independence"] = measured(layout.batch_independence, kits[:1]) if len(x) > 1 else (None, "one sample")
    found["no causal leak"] = measured(masks.causal_change, kits) if causal else (None, "not causal")
    found["key padding invisible"] = measured(masks.given_padding_hidden, kits)
    return found


def measured(check: Any, kits: list[Kit]) -> tuple[bool | None, str]:
    """``check`` on each kit: the first failure (with its mode), else the last measure."""
    outcome: tuple[bool | None, str] = (None, "not run")
    for kit in kits:
        try:
            with torch.no_grad():
                outcome = check(kit)
        except NotMeasurable:
            outcome = (None, not_measurable(kit))
        if outcome[0] is False:
            return False, outcome[1] + ("" if len(kits) == 1 else f" (in {mode(kit)} mode)")
    return outcome


def mode(kit: Kit) -> str:
    return "training" if kit.training else "eval"


def keep_inputs(calls: list[tuple[tuple, dict]], mixer: nn.Module, args: tuple, kwargs: dict) -> None:
    """A forward pre-hook's record of a mixer's first call: its arguments."""
    if not calls:
        calls.append((args, dict(kwargs)))


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
