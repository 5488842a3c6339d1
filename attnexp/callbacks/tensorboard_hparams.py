"""What a run shows in TensorBoard besides its curves: the composed config (Text tab) and its HParams entry, with
the same keys for every run whatever the mixer or task.

Each run writes an HParams "experiment" beside its session: its columns in the order of ``CURATED`` (then the keys
its command line sets), and its metrics with the task's headline metric first, then the other test, validation and
training metrics, then attention telemetry (``attn/``). TensorBoard sorts columns by name (and shows the first five
of each kind): the names are numbered so that they sort in that order, and shown without their numbers. Whole numbers
(seed, width, ...) are text, which TensorBoard shows as they are (as numbers it would show ``0.0000``). It shows one
experiment for a log dir, any run's: runs of other tasks in the same log dir show their own metrics in the Scalars
tab only."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import yaml
from omegaconf import OmegaConf
from pytorch_lightning.loggers import TensorBoardLogger
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

from attnexp.callbacks.metrics_writer import code_and_machine
from attnexp.mixers import is_mixer
from attnexp.runs.fingerprint import Settings

# every run's HParams keys in column order, then the keys its command line sets
CURATED = ("mixer", "seed", "data", "lr", "params", "net", "task", "width", "depth", "heads", "batch_size", "epochs")
AS_TEXT = ("seed", "width", "depth", "heads", "batch_size", "epochs")  # whole numbers TensorBoard would show as 0.0000


def curated_hparams(run: Settings, pl_module: pl.LightningModule) -> dict[str, Any]:
    """The run's curated hyperparameters, plus the keys its command line sets (a sweep's varying keys)."""
    cfg, choices = OmegaConf.create(run.config), run.choices
    mixers = [m for m in pl_module.net.modules() if is_mixer(m)]  # built-in or not (see attnexp.mixers.contract)
    values = {
        "mixer": choices.get("model"), "seed": cfg.get("seed"), "data": choices.get("data"),
        "lr": OmegaConf.select(cfg, "module.optimizer.lr"), "params": sum(p.numel() for p in pl_module.parameters()),
        "net": choices.get("net"), "task": choices.get("task"),
        "width": mixers[0].request.dim if mixers else 0, "depth": len(mixers),
        "heads": getattr(mixers[0], "heads", 0) if mixers else 0,  # 0: the mixer has no heads
        "batch_size": OmegaConf.select(cfg, "data.batch_size"), "epochs": OmegaConf.select(cfg, "trainer.max_epochs"),
    }
    for override in run.overrides:
        key, _, value = str(override).lstrip("+~").partition("=")
        if key not in ("model", "data", "net", "task", "seed"):
            try:
                values[key] = OmegaConf.select(cfg, key, default=value)
            except Exception:  # a value recorded as written (a location): the override's words
                values[key] = value
    return {k: str(v) if k in AS_TEXT and v is not None else hparam_value(v) for k, v in values.items()}


def what_ran(run: Settings, trainer: pl.Trainer, pl_module: pl.LightningModule) -> str:
    """The Text tab's ``config``: what metrics.json records of what ran (fingerprint, options, mixer sources, software,
    device, the resolved config), as a Markdown code block of YAML."""
    shown = {"fingerprint": run.fingerprint, "choices": run.choices, **code_and_machine(trainer, pl_module), "config": run.config}
    return "".join(f"    {line}\n" for line in yaml.safe_dump(shown, sort_keys=False).splitlines())


def hparam_value(value: Any) -> Any:
    """HParams take numbers, strings and booleans."""
    return value if isinstance(value, (bool, int, float, str)) else "null" if value is None else str(value)


def column_names(keys: Iterable[str]) -> dict[str, str]:
    """Each key's HParams name: numbered, so that TensorBoard's sort by name keeps this order (``03 data``)."""
    return {key: f"{i:02d} {key}" for i, key in enumerate(keys, start=1)}


def metric_tags(pl_module: pl.LightningModule, logged: Iterable[str]) -> list[str]:
    """The run's metrics in HParams order: the task's summary metrics (its headline one first) and checkpoint metric,
    the other test, validation and training metrics, then what else is logged (attention telemetry last)."""
    import torch

    task, one = pl_module.task, torch.ones(())
    test, val = list(getattr(pl_module, "test_metrics", {})), list(getattr(pl_module, "val_metrics", {}))
    known = ["test/loss", *(f"test/{name}" for name in test), *task.derived("test", one),
             "val/loss", *(f"val/{name}" for name in val), *task.derived("val", one), *(["val/acc_best"] if "acc" in val else []),
             "train/loss", "train/acc", *task.derived("train", one), "train/lr"]
    rest = sorted((k for k in logged if "/" in k and not k.endswith("_step")), key=lambda k: (k.startswith("attn/"), k))
    return list(dict.fromkeys([*task.summary, task.monitor, *known, *rest]))


def hparams_summary(tag: str, **data: Any) -> summary_pb2.Summary:
    """A summary of TensorBoard's HParams plugin: its experiment, or a session's start or end."""
    value = summary_pb2.Summary.Value(tag=tag, metadata=metadata.create_summary_metadata(plugin_data_pb2.HParamsPluginData(**data)),
                                      tensor=metadata.NULL_TENSOR)
    return summary_pb2.Summary(value=[value])


def session_end() -> summary_pb2.Summary:
    return hparams_summary(metadata.SESSION_END_INFO_TAG, session_end_info=plugin_data_pb2.SessionEndInfo(
        status=api_pb2.STATUS_SUCCESS, end_time_secs=time.time()))


class TensorBoardHParams(pl.Callback):
    """Writes the composed config to the Text tab and ``hparams.yaml`` when training starts; the HParams experiment
    and session start after the first validation (the telemetry's metrics are known then) or when fit ends, whichever
    comes first; and the session end when the run is finished (after the test, or after fit when ``test`` is false)."""

    def __init__(self, output_dir: str, test: bool = True, run: Settings | None = None) -> None:
        self.output_dir, self.test, self.run = Path(output_dir), test, run
        self.hparams: dict[str, Any] = {}
        self.started = False

    def _loggers(self, trainer: pl.Trainer) -> list[TensorBoardLogger]:
        return [lg for lg in trainer.loggers if isinstance(lg, TensorBoardLogger)] if trainer.is_global_zero else []

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.run is None:
            return
        self.hparams = curated_hparams(self.run, pl_module)
        for logger in self._loggers(trainer):
            logger.log_hyperparams(self.hparams)  # only kept for hparams.yaml: default_hp_metric is off
            logger.experiment.add_text("config", what_ran(self.run, trainer, pl_module), global_step=0)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._start(trainer, pl_module)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start(trainer, pl_module)
        if not self.test:
            self._write(trainer, session_end())

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._write(trainer, session_end())

    def _start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """The experiment (columns in order, shown by their keys) and the session's values, once."""
        if self.started or not self.hparams:
            return
        self.started = True
        names = column_names(self.hparams)
        infos = [api_pb2.HParamInfo(name=names[k], display_name=k, type=api_pb2.DATA_TYPE_STRING if isinstance(v, str) else
                                    api_pb2.DATA_TYPE_BOOL if isinstance(v, bool) else api_pb2.DATA_TYPE_FLOAT64)
                 for k, v in self.hparams.items()]
        metrics = [api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag), display_name=tag)
                   for tag in metric_tags(pl_module, trainer.callback_metrics)]
        start = plugin_data_pb2.SessionStartInfo(start_time_secs=time.time())
        for key, value in self.hparams.items():
            field = "string_value" if isinstance(value, str) else "bool_value" if isinstance(value, bool) else "number_value"
            setattr(start.hparams[names[key]], field, value)
        self._write(trainer, hparams_summary(metadata.EXPERIMENT_TAG, experiment=api_pb2.Experiment(
            hparam_infos=infos, metric_infos=metrics, time_created_secs=time.time())))
        self._write(trainer, hparams_summary(metadata.SESSION_START_INFO_TAG, session_start_info=start))

    def _write(self, trainer: pl.Trainer, proto: Any) -> None:
        for logger in self._loggers(trainer):
            writer = logger.experiment._get_file_writer()
            writer.add_summary(proto)
            writer.flush()
