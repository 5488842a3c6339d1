"""What a run shows in TensorBoard besides its curves: what its record says ran (Text tab) and its HParams row, the
same keys for every run whatever the mixer or task, written by Lightning's ``TensorBoardLogger.log_hyperparams`` when
the run is finished, with the task's summary metrics (headline first) as the row's metric columns."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
import yaml
from omegaconf import OmegaConf
from pytorch_lightning.loggers import TensorBoardLogger

from attnexp.mixers import is_mixer
from attnexp.runs.record import RunRecord

CURATED = (
    "mixer",
    "seed",
    "data",
    "lr",
    "params",
    "net",
    "task",
    "width",
    "depth",
    "heads",
    "weight_kind",
    "batch_size",
    "epochs",
)
AS_TEXT = ("seed", "width", "depth", "heads", "batch_size", "epochs")  # whole numbers TensorBoard would show as 0.0000
WHAT_RAN = ("identity", "choices", "command", "software", "device", "config")  # the record's fields in the Text tab


def curated_hparams(record: RunRecord, pl_module: Any) -> dict[str, Any]:
    """The run's curated hyperparameters, plus the keys its command line sets (a sweep's varying keys)."""
    fields = record.fields
    cfg, choices = OmegaConf.create(fields["config"]), fields["choices"]
    mixers = [m for m in pl_module.net.modules() if is_mixer(m)]  # built-in or not (see attnexp.mixers.contract)
    first = mixers[0] if mixers else None
    values = {"mixer": choices.get("model"), "seed": cfg.get("seed"), "data": choices.get("data")}
    values |= {"lr": OmegaConf.select(cfg, "module.optimizer.lr"), "params": fields.get("params")}
    values |= {"net": choices.get("net"), "task": choices.get("task"), "width": first.request.dim if first else 0}
    values |= {"depth": len(mixers), "heads": getattr(first, "heads", 0)}  # 0: the mixer has no heads
    values |= {"weight_kind": shown_kind(fields.get("weight_kind"))}
    values |= {"batch_size": cfg.data.get("batch_size"), "epochs": OmegaConf.select(cfg, "trainer.max_epochs")}
    for override in fields.get("overrides", []):
        key, _, value = str(override).lstrip("+~").partition("=")
        if key not in ("model", "data", "net", "task", "seed"):
            try:
                values[key] = OmegaConf.select(cfg, key, default=value)
            except Exception:  # a value recorded as written (a location): the override's words
                values[key] = value
    shown = {k: str(v) if k in AS_TEXT and v is not None else v for k, v in values.items()}
    return {k: "null" if v is None else str(v).lower() if isinstance(v, bool) else v for k, v in shown.items()}


def shown_kind(kind: Any) -> str | None:
    """A record's ``weight_kind`` as one value: the kind, or the kinds of an encoder-decoder's mixers joined."""
    return ",".join(dict.fromkeys(kind)) if isinstance(kind, list) else kind


class TensorBoardHParams(pl.Callback):
    """Writes what the record says ran to the Text tab and ``hparams.yaml`` when training starts, and the HParams row
    when the run is finished: after the test, or after fit when ``test`` is false. ``record``: the run's record,
    handed over by the entrypoint."""

    def __init__(self, record: RunRecord | None = None, test: bool = True) -> None:
        self.record, self.test = record, test

    def _loggers(self, trainer: pl.Trainer) -> list[TensorBoardLogger]:
        return [lg for lg in trainer.loggers if isinstance(lg, TensorBoardLogger)] if trainer.is_global_zero else []

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        """Before Lightning writes ``hparams.yaml`` (when fitting starts): the values, and what ran as text."""
        if self.record is not None and stage == "fit":
            shown = {key: self.record.fields.get(key) for key in WHAT_RAN}
            text = "".join(f"    {line}\n" for line in yaml.safe_dump(shown, sort_keys=False).splitlines())
            for logger in self._loggers(trainer):
                logger.log_hyperparams(curated_hparams(self.record, pl_module))
                logger.experiment.add_text("config", text, global_step=0)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if not self.test:
            self._row(trainer, pl_module, trainer.current_epoch)

    def on_test_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._row(trainer, pl_module, getattr(pl_module, "tested_epoch", None) or trainer.current_epoch)

    def _row(self, trainer: pl.Trainer, pl_module: Any, step: int) -> None:
        """The HParams row; its metrics are logged again at the step they were logged at, with the same values."""
        if self.record is None:
            return
        known = {**self.record.fields, **trainer.callback_metrics}  # the test's metrics, and the fit's best
        metrics = {k: float(known[k]) for k in pl_module.task.summary if k in known}
        for logger in self._loggers(trainer):
            logger.log_hyperparams(curated_hparams(self.record, pl_module), metrics, step=step)
