"""Attention health: what every attention layer does on a fixed validation batch, logged every validation epoch
(the statistics: :mod:`attnexp.training.health`)."""

from __future__ import annotations

import functools
from typing import Any

import pytorch_lightning as pl
import torch

from attnexp.mixers import is_mixer, weight_kind
from attnexp.mixers.declared import check_declared_weights, scores_unmeasured
from attnexp.training.callbacks.figures import forward_with_weights
from attnexp.training.health import CallRecorder, attention_stats, gate_stats


class AttentionTelemetry(pl.Callback):
    """Logs, at the end of every validation epoch, :func:`attention_stats` (or :func:`gate_stats`) of every
    layer under ``attn/layer<i>/``, on the first ``samples`` inputs of the first validation batch. It costs one
    forward pass with weights on that batch per epoch; the last values reach metrics.json, and what it could not
    measure (the scores of a mixer that offers none) the run's ``record``. Before the first training batch, the same
    pass on it holds each mixer's weights to its ``weight_kind`` (:func:`check_declared_weights`)."""

    def __init__(self, samples: int = 64, record: Any = None) -> None:
        self.samples, self.record, self.checked = samples, record, False

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if not self.checked:
            self.checked = True
            x = batch[0][: self.samples]
            for mixer, _, weights, call in self.layers(pl_module, x):
                again = functools.partial(returned_weights, pl_module, x, mixer)  # for the line that computed them
                check_declared_weights(mixer, weights, call.get("mask"), "16" in str(trainer.precision), again)

    def layers(self, pl_module: Any, x: Any) -> list[tuple[Any, Any, Any, dict]]:
        """Each mixer, its scores, its weights and its call's arguments, from one forward pass with weights on ``x``."""
        mixers = [m for m in pl_module.net.modules() if is_mixer(m)]
        recorders = [CallRecorder(m) for m in mixers]
        try:
            _, maps = forward_with_weights(pl_module, x)
        finally:
            for recorder in recorders:
                recorder.close()
        return [(m, r.scores, w, r.call) for m, r, w in zip(mixers, recorders, maps)]

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        datamodule = getattr(trainer, "datamodule", None)
        if trainer.sanity_checking or datamodule is None:
            return
        devices = [pl_module.device] if pl_module.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # a loader's iterator draws a seed: training's stay as they were
            x = next(iter(datamodule.val_dataloader()))[0][: self.samples]
        values: dict[str, float] = {}
        unmeasured = set()
        for i, (mixer, scores, weights, call) in enumerate(self.layers(pl_module, x)):
            if weights is None:
                continue
            if weights.dim() == 4:
                stats = attention_stats(
                    weights,
                    scores,
                    mixer.request.causal,
                    call.get("mask"),
                    call.get("context") is None,
                    weight_kind(mixer),
                )
                if scores is None:
                    unmeasured.add(scores_unmeasured(mixer))
            else:
                stats = gate_stats(weights)
            values.update({f"attn/layer{i}/{name}": value for name, value in stats.items()})
        if unmeasured and self.record is not None:
            self.record.fields["telemetry_unmeasured"] = sorted(unmeasured)
        if values:  # flushed with the module's validation metrics, whose "step" key (the epoch) they share
            pl_module.log_dict(values, sync_dist=True)


def returned_weights(pl_module: Any, x: Any, mixer: Any) -> Any:
    """The weights ``mixer`` returns in a forward pass with weights on ``x``."""
    kept: list[Any] = []
    hook = mixer.register_forward_hook(lambda module, args, out: kept.append(out[1]))
    try:
        forward_with_weights(pl_module, x)
    finally:
        hook.remove()
    return kept[-1] if kept else None
