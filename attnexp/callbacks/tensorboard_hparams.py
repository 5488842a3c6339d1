"""What a run shows in TensorBoard besides its curves: what its record says ran (Text tab) and its HParams entry, with
the same keys for every run whatever the mixer or task.

Each run writes an HParams "experiment" beside its session: its columns in the order of ``CURATED`` (then the keys
its command line sets), and its metrics with the task's headline metric first, then the other test, validation and
training metrics, then attention telemetry (``attn/``). TensorBoard sorts columns by name (and shows the first five
of each kind): the names are numbered so that they sort in that order, and shown without their numbers. Whole numbers
(seed, width, ...) are text, which TensorBoard shows as they are (as numbers it would show ``0.0000``). It shows one
experiment for a log dir, any run's: runs of other tasks in the same log dir show their own metrics in the Scalars
tab only. The summaries are made by ``torch.utils.tensorboard``'s ``hparams``; TensorBoard's own functions for them
need TensorFlow.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytorch_lightning as pl
import yaml
from omegaconf import OmegaConf
from pytorch_lightning.loggers import TensorBoardLogger
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
from torch.utils.tensorboard.summary import hparams

from attnexp.mixers import is_mixer
from attnexp.runs.record import RunRecord

# every run's HParams keys in column order, then the keys its command line sets
CURATED = ("mixer", "seed", "data", "lr", "params", "net", "task", "width", "depth", "heads", "batch_size", "epochs")
AS_TEXT = ("seed", "width", "depth", "heads", "batch_size", "epochs")  # whole numbers TensorBoard would show as 0.0000
WHAT_RAN = ("fingerprint", "choices", "mixers", "software", "device", "config")  # the record's fields in the Text tab


def curated_hparams(record: RunRecord, pl_module: Any) -> dict[str, Any]:
    """The run's curated hyperparameters, plus the keys its command line sets (a sweep's varying keys)."""
    cfg, choices = OmegaConf.create(record.settings.config), record.settings.choices
    mixers = [m for m in pl_module.net.modules() if is_mixer(m)]  # built-in or not (see attnexp.mixers.contract)
    values = {
        "mixer": choices.get("model"),
        "seed": cfg.get("seed"),
        "data": choices.get("data"),
        "lr": OmegaConf.select(cfg, "module.optimizer.lr"),
        "params": record.fields.get("params"),
        "net": choices.get("net"),
        "task": choices.get("task"),
        "width": mixers[0].request.dim if mixers else 0,
        "depth": len(mixers),
        "heads": getattr(mixers[0], "heads", 0) if mixers else 0,  # 0: the mixer has no heads
        "batch_size": OmegaConf.select(cfg, "data.batch_size"),
        "epochs": OmegaConf.select(cfg, "trainer.max_epochs"),
    }
    for override in record.settings.overrides:
        key, _, value = str(override).lstrip("+~").partition("=")
        if key not in ("model", "data", "net", "task", "seed"):
            try:
                values[key] = OmegaConf.select(cfg, key, default=value)
            except Exception:  # a value recorded as written (a location): the override's words
                values[key] = value
    return {k: str(v) if k in AS_TEXT and v is not None else hparam_value(v) for k, v in values.items()}


def hparam_value(value: Any) -> Any:
    """HParams take numbers and strings (a boolean as text: ``true``)."""
    if isinstance(value, bool) or value is None:
        return "null" if value is None else str(value).lower()
    return value if isinstance(value, (int, float, str)) else str(value)


def metric_tags(pl_module: Any, logged: Iterable[str]) -> list[str]:
    """The run's metrics in HParams order: the task's summary metrics (its headline one first) and checkpoint metric,
    the other test, validation and training metrics, then what else is logged (attention telemetry last)."""
    import torch

    task, one = pl_module.task, torch.ones(())
    test, val = list(getattr(pl_module, "test_metrics", {})), list(getattr(pl_module, "val_metrics", {}))
    known = [
        "test/loss",
        *(f"test/{name}" for name in test),
        *task.derived("test", one),
        "val/loss",
        *(f"val/{name}" for name in val),
        *task.derived("val", one),
        *(["val/acc_best"] if "acc" in val else []),
        "train/loss",
        "train/acc",
        *task.derived("train", one),
        "train/lr",
    ]
    rest = sorted((k for k in logged if "/" in k and not k.endswith("_step")), key=lambda k: (k.startswith("attn/"), k))
    return list(dict.fromkeys([*task.summary, task.monitor, *known, *rest]))


def experiment(values: dict[str, Any], metrics: list[str]) -> tuple[Any, Any]:
    """The HParams experiment (columns numbered in order, shown by their keys) and the session's start."""
    names = {key: f"{i:02d} {key}" for i, key in enumerate(values, start=1)}
    summary, start, _ = hparams({names[k]: v for k, v in values.items()}, dict.fromkeys(metrics, 0.0))
    content = summary.value[0].metadata.plugin_data
    data = HParamsPluginData.FromString(content.content)
    for info in data.experiment.hparam_infos:
        info.display_name = info.name.split(" ", 1)[1]
    content.content = data.SerializeToString()
    return summary, start


class TensorBoardHParams(pl.Callback):
    """Writes what the record says ran to the Text tab and the hyperparameters to ``hparams.yaml`` when training
    starts; the HParams experiment and session start after the first validation (the telemetry's metrics are known
    then) or when fit ends, whichever comes first; and the session end when the run is finished (after the test, or
    after fit when ``test`` is false). ``record``: the run's record, handed over by the entrypoint."""

    def __init__(self, record: RunRecord | None = None, test: bool = True) -> None:
        self.record, self.test = record, test
        self.hparams: dict[str, Any] = {}
        self.started = False

    def _loggers(self, trainer: pl.Trainer) -> list[TensorBoardLogger]:
        return [lg for lg in trainer.loggers if isinstance(lg, TensorBoardLogger)] if trainer.is_global_zero else []

    def on_fit_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if self.record is None:
            return
        self.hparams = curated_hparams(self.record, pl_module)
        shown = {key: self.record.fields.get(key) for key in WHAT_RAN}
        text = "".join(f"    {line}\n" for line in yaml.safe_dump(shown, sort_keys=False).splitlines())
        for logger in self._loggers(trainer):
            logger.log_hyperparams(self.hparams)  # hparams.yaml (no HParams summary: default_hp_metric is off)
            logger.experiment.add_text("config", text, global_step=0)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            self._start(trainer, pl_module)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._start(trainer, pl_module)
        if not self.test:
            self._end(trainer)

    def on_test_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._end(trainer)

    def _start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if self.started or not self.hparams:
            return
        self.started = True
        summaries = experiment(self.hparams, metric_tags(pl_module, trainer.callback_metrics))
        for writer in (lg.experiment for lg in self._loggers(trainer)):
            for summary in summaries:
                writer.file_writer.add_summary(summary)
            writer.flush()

    def _end(self, trainer: pl.Trainer) -> None:
        if self.started:
            for writer in (lg.experiment for lg in self._loggers(trainer)):
                writer.file_writer.add_summary(hparams({}, {})[2])  # the session's end, successful
                writer.flush()
