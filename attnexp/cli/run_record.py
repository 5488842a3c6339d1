"""metrics.json for every run, and TensorBoard hparams with the real final metrics."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from omegaconf import OmegaConf
from pytorch_lightning.loggers import TensorBoardLogger

from attnexp.cli import record
from attnexp.errors import explain
from attnexp.module import DivergedError


def write_hparams(logger: TensorBoardLogger, params: dict[str, Any], metrics: dict[str, float]) -> None:
    """Add the HParams-tab entry for this run, naming the metrics it shows.

    Only the hparams summaries are written: the metric values come from the
    scalars already logged under the same tags, so no extra points are added.
    """
    from torch.utils.tensorboard.summary import hparams

    writer = logger.experiment._get_file_writer()
    for summary in hparams(params, metrics):
        writer.add_summary(summary)
    writer.flush()


def run_hparams(output_dir: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """Flat hyperparameters and config-group choices of the Hydra run in ``output_dir``."""
    cfg_path, hydra_path = output_dir / ".hydra" / "config.yaml", output_dir / ".hydra" / "hydra.yaml"
    if not cfg_path.exists():
        return {}, {}
    cfg = OmegaConf.to_container(OmegaConf.load(cfg_path), resolve=False)
    choices = dict(OmegaConf.load(hydra_path).hydra.runtime.choices) if hydra_path.exists() else {}
    flat: dict[str, Any] = {f"choice/{k}": str(v) for k, v in choices.items() if not k.startswith("hydra")}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if not str(key).startswith("_"):
                    walk(f"{prefix}{key}.", value)
        elif not isinstance(node, str) or "${" not in node:
            flat[prefix[:-1]] = node if isinstance(node, (int, float, bool, str)) else str(node)

    for section in ("model", "net", "data", "task", "module", "seed", "trainer"):
        walk(f"{section}.", cfg.get(section))
    return flat, {k: str(v) for k, v in choices.items() if not k.startswith("hydra")}


class RunRecord(pl.Callback):
    """Keeps ``metrics.json`` in the run folder up to date.

    ``status`` is ``running`` while training, ``trained`` after fit, ``ok``
    after test (after fit when ``test`` is false: no test follows); ``failed``
    or ``diverged`` (with ``error``) or ``interrupted`` (a checkpoint of the last
    completed step is saved as ``checkpoints/interrupted.ckpt``) if the run stops
    early. Final metrics appear under their logged names (``test/acc``).
    """

    def __init__(self, output_dir: str, test: bool = True) -> None:
        self.output_dir, self.test = Path(output_dir), test
        self.started = time.perf_counter()
        self.fit_seconds, self.first_epoch = 0.0, 0
        self.samples = 0
        self.record: dict[str, Any] = {}

    def _write(self, trainer: pl.Trainer, status: str, **extra: Any) -> None:
        self.record.update(record.final_metrics(trainer.callback_metrics))
        self.record.update(status=status, wall_s=round(time.perf_counter() - self.started, 3), **extra)
        if trainer.is_global_zero:
            record.write(self.output_dir, self.record)

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self.record:
            return
        self.hparams, choices = run_hparams(self.output_dir)
        self.record = record.header(choices, self.hparams.get("seed"), params=sum(p.numel() for p in pl_module.parameters()))

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fit_started = time.perf_counter()
        self._write(trainer, record.RUNNING)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.first_epoch = trainer.current_epoch  # after a resumed checkpoint is restored

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.samples += len(batch[0])

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._write(trainer, record.RUNNING, epochs=trainer.current_epoch + 1)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fit_seconds = time.perf_counter() - self.fit_started
        epochs = max(1, trainer.current_epoch - self.first_epoch)  # the epochs this fit ran
        self._write(
            trainer,
            record.TRAINED if self.test else record.OK,
            fit_s=round(self.fit_seconds, 3),
            seconds_per_epoch=round(self.fit_seconds / epochs, 3),
            train_samples_per_s=round(self.samples * trainer.world_size / max(self.fit_seconds, 1e-9), 1),  # ranks get equal shares
        )
        if not self.test:
            self._write_hparams(trainer)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._write(trainer, record.OK)
        self._write_hparams(trainer)

    def _write_hparams(self, trainer: pl.Trainer) -> None:
        metrics = {k: v for k, v in record.final_metrics(self.record).items() if math.isfinite(v)}
        for logger in trainer.loggers:
            if self.hparams and isinstance(logger, TensorBoardLogger) and trainer.is_global_zero:
                write_hparams(logger, self.hparams, metrics)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if isinstance(exception, (KeyboardInterrupt, SystemExit)):  # Ctrl-C, or SIGTERM via Lightning
            if trainer.world_size == 1:
                trainer.save_checkpoint(self.output_dir / "checkpoints" / "interrupted.ckpt")
            self._write(trainer, record.INTERRUPTED)
        else:
            status = record.DIVERGED if isinstance(exception, DivergedError) else record.FAILED
            self._write(trainer, status, error=explain(exception))
