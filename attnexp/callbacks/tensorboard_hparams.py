"""What a run shows in TensorBoard besides its curves: the composed config (Text tab) and its HParams session,
with the same keys for every run whatever the mixer or task.

Runs write their session but no HParams "experiment": TensorBoard then builds the table from every run's
session (the union of their keys, those that differ between runs shown first: mixer and seed in a sweep) and
every run's scalars as metrics, so runs of different tasks in one log dir drop no column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from omegaconf import OmegaConf
from pytorch_lightning.loggers import TensorBoardLogger

from attnexp.mixers import is_mixer
from attnexp.runs.folders import hydra_files

# every run's HParams keys (TensorBoard lists those that differ between runs first), then the swept keys
CURATED = ("mixer", "seed", "data", "lr", "params", "net", "task", "width", "depth", "heads", "batch_size", "epochs")


def curated_hparams(output_dir: Path, pl_module: pl.LightningModule) -> dict[str, Any]:
    """The run's curated hyperparameters, plus the keys its command line sets (a sweep's varying keys)."""
    cfg, hydra = hydra_files(output_dir)
    if cfg is None or hydra is None:
        return {}
    choices = hydra.runtime.choices
    mixers = [m for m in pl_module.net.modules() if is_mixer(m)]  # built-in or not (see attnexp.mixers.contract)
    values = {
        "mixer": choices.get("model"), "seed": cfg.get("seed"), "data": choices.get("data"),
        "lr": OmegaConf.select(cfg, "module.optimizer.lr"), "params": sum(p.numel() for p in pl_module.parameters()),
        "net": choices.get("net"), "task": choices.get("task"),
        "width": mixers[0].request.dim if mixers else 0, "depth": len(mixers),
        "heads": getattr(mixers[0], "heads", 0) if mixers else 0,  # 0: the mixer has no heads
        "batch_size": OmegaConf.select(cfg, "data.batch_size"), "epochs": OmegaConf.select(cfg, "trainer.max_epochs"),
    }
    excluded = set(hydra.job.config.override_dirname.exclude_keys)
    for override in hydra.overrides.task:
        key, _, value = str(override).lstrip("+~").partition("=")
        if key not in excluded and key not in ("model", "data", "net", "task", "seed"):
            values[key] = OmegaConf.select(cfg, key, default=value)
    return {k: hparam_value(v) for k, v in values.items()}


def hparam_value(value: Any) -> Any:
    """HParams take numbers, strings and booleans."""
    return value if isinstance(value, (bool, int, float, str)) else "null" if value is None else str(value)


class TensorBoardHParams(pl.Callback):
    """Writes the composed config to the Text tab, ``hparams.yaml`` and the HParams session start when training
    starts, and the session end when the run is finished (after the test, or after fit when ``test`` is false)."""

    def __init__(self, output_dir: str, test: bool = True) -> None:
        self.output_dir, self.test = Path(output_dir), test
        self.hparams: dict[str, Any] = {}

    def _loggers(self, trainer: pl.Trainer) -> list[TensorBoardLogger]:
        return [lg for lg in trainer.loggers if isinstance(lg, TensorBoardLogger)] if trainer.is_global_zero else []

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.hparams = curated_hparams(self.output_dir, pl_module)
        config = self.output_dir / ".hydra" / "config.yaml"
        for logger in self._loggers(trainer):
            logger.log_hyperparams(self.hparams)  # only kept for hparams.yaml: default_hp_metric is off
            if config.exists():
                text = "".join(f"    {line}\n" for line in config.read_text().splitlines())  # a Markdown code block
                logger.experiment.add_text("config", text, global_step=0)
        self._write_session(trainer, start=True)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.test:
            self._write_session(trainer, start=False)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._write_session(trainer, start=False)

    def _write_session(self, trainer: pl.Trainer, start: bool) -> None:
        """The HParams session's start (its hyperparameters) or end; the metric values are the logged scalars."""
        from torch.utils.tensorboard.summary import hparams

        if not self.hparams:
            return
        _, session_start, session_end = hparams(self.hparams, {})
        for logger in self._loggers(trainer):
            writer = logger.experiment._get_file_writer()
            writer.add_summary(session_start if start else session_end)
            writer.flush()
