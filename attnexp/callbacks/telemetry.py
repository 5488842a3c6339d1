"""Attention health: what every attention layer does on a fixed validation batch, logged every validation epoch
(the statistics: :mod:`attnexp.callbacks.health`)."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
import torch

from attnexp.callbacks.figures import forward_with_weights
from attnexp.callbacks.health import CallRecorder, attention_stats, gate_stats
from attnexp.mixers import is_mixer, weight_kind


class AttentionTelemetry(pl.Callback):
    """Logs, at the end of every validation epoch, :func:`attention_stats` (or :func:`gate_stats`) of every
    layer under ``attn/layer<i>/``, on the first ``samples`` inputs of the first validation batch. It costs one
    forward pass with weights on that batch per epoch; the last values reach metrics.json."""

    def __init__(self, samples: int = 64) -> None:
        self.samples = samples

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        datamodule = getattr(trainer, "datamodule", None)
        if trainer.sanity_checking or datamodule is None:
            return
        devices = [pl_module.device] if pl_module.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # a loader's iterator draws a seed: training's stay as they were
            x = next(iter(datamodule.val_dataloader()))[0][: self.samples]
        mixers = [m for m in pl_module.net.modules() if is_mixer(m)]
        recorders = [CallRecorder(m) for m in mixers]
        try:
            _, maps = forward_with_weights(pl_module, x)
        finally:
            for recorder in recorders:
                recorder.close()
        values: dict[str, float] = {}
        for i, (mixer, recorder, weights) in enumerate(zip(mixers, recorders, maps)):
            if weights is None:
                continue
            if weights.dim() == 4:
                call = recorder.call
                stats = attention_stats(
                    weights,
                    recorder.scores,
                    mixer.request.causal,
                    call.get("mask"),
                    call.get("context") is None,
                    weight_kind(mixer),
                )
            else:
                stats = gate_stats(weights)
            values.update({f"attn/layer{i}/{name}": value for name, value in stats.items()})
        if values:  # flushed with the module's validation metrics, whose "step" key (the epoch) they share
            pl_module.log_dict(values, sync_dist=True)
