"""The callback that keeps every run's metrics.json up to date (see :mod:`attnexp.runs.metrics_file`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl

from attnexp.divergence import DivergedError
from attnexp.errors import explain
from attnexp.mixers import MultiHeadAttention
from attnexp.runs import convergence, metrics_file, provenance
from attnexp.runs.fingerprint import Settings


def best_score(trainer: pl.Trainer) -> dict[str, float]:
    """``monitor_best``: the best value of the task's checkpoint metric, the one the tested checkpoint has."""
    score = getattr(trainer.checkpoint_callback, "best_model_score", None)
    return {} if score is None else {"monitor_best": float(score)}


def outcome(trainer: pl.Trainer, validated: bool, test: bool) -> dict[str, str]:
    """How a finished fit ends: ``ok``; ``untrained`` when no training batch ran; ``unvalidated`` when no validation
    ran (no best checkpoint was chosen: the test measures the last weights). With ``error`` saying why."""
    what = "the test measured" if test else "the run holds"
    if trainer.global_step == 0:
        return {"status": metrics_file.UNTRAINED, "error": (
            f"no training batch ran (trainer.limit_train_batches={trainer.limit_train_batches}), so {what} the "
            "initial weights.")}
    score = getattr(trainer.checkpoint_callback, "best_model_score", None)
    if not validated and score is None:
        return {"status": metrics_file.UNVALIDATED, "error": (
            f"no validation ran (trainer.limit_val_batches={trainer.limit_val_batches}, "
            f"trainer.check_val_every_n_epoch={trainer.check_val_every_n_epoch}, {trainer.current_epoch} epochs), so no "
            f"best checkpoint was chosen and {what} the last weights.")}
    return {"status": metrics_file.OK}


def code_and_machine(trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, Any]:
    """What ran besides the settings: each mixer class's module, file and source hash, the software and the device."""
    return {"mixers": provenance.mixer_sources(pl_module.net), "software": provenance.software(),
            "device": provenance.device(trainer.strategy.root_device, trainer.num_devices)}


class MetricsFileWriter(pl.Callback):
    """Keeps ``metrics.json`` in the run folder up to date.

    ``status`` is ``running`` while training, ``trained`` after fit, ``ok``
    after test (after fit when ``test`` is false: no test follows); ``failed``
    or ``diverged`` (with ``error``) or ``interrupted`` (a checkpoint of the last
    completed step is saved as ``checkpoints/interrupted.ckpt``) if the run stops
    early. A run that trained no batch ends ``untrained``, one that never validated
    (so no best checkpoint was chosen) ``unvalidated``, each with ``error`` saying
    why: never ``ok``. Final metrics appear under their logged names (``test/acc``).

    ``run`` (given by the entrypoint) says what was asked for: the settings and their fingerprint. The record adds
    what ran (mixer sources, software, device), the checkpoint metric after every validation (``monitor_history``,
    kept in checkpoints so that a resumed run has it whole) and whether the run was still improving when its budget
    ended (:mod:`attnexp.runs.convergence`).
    """

    def __init__(self, output_dir: str, test: bool = True, run: Settings | None = None) -> None:
        self.output_dir, self.test, self.run = Path(output_dir), test, run
        self.started = time.perf_counter()
        self.fit_seconds, self.first_epoch = 0.0, 0
        self.samples, self.validated = 0, False
        self.outcome: dict[str, Any] = {"status": metrics_file.OK}
        self.record: dict[str, Any] = {}
        self.history: list[list[float]] = []  # [epoch, value of the task's checkpoint metric] after each validation

    def state_dict(self) -> dict[str, Any]:
        return {"monitor_history": self.history}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = [list(item) for item in state_dict.get("monitor_history", [])]

    def _write(self, trainer: pl.Trainer, status: str = metrics_file.OK, **extra: Any) -> None:
        self.record.update(metrics_file.final_metrics(trainer.callback_metrics))
        self.record.update(status=status, wall_s=round(time.perf_counter() - self.started, 3), **extra)
        if trainer.is_global_zero:
            metrics_file.write(self.output_dir, self.record)

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self.record:
            return
        run = self.run or Settings({}, {})
        self.record = metrics_file.header(run.choices, run.config.get("seed"), params=sum(p.numel() for p in pl_module.parameters()))
        self.record.update(run.record() if self.run else {}, **code_and_machine(trainer, pl_module))
        batch = getattr(trainer.datamodule, "batch_size", None)
        if isinstance(batch, int):  # per device; data-parallel devices and accumulated batches make one optimizer step
            steps = trainer.accumulate_grad_batches
            self.record.update(batch_size=batch, effective_batch_size=batch * trainer.world_size * steps)
        task = pl_module.task
        self.record.update(classes=pl_module.net.num_classes, summary=list(task.summary.items()), monitor=task.monitor, mode=task.mode)
        paths = sorted({m.path_for(pl_module.device) for m in pl_module.net.modules() if isinstance(m, MultiHeadAttention)})
        if paths:  # the path that trains (model.path; explicit while dropout is on and the fused path has none)
            self.record["path"] = ",".join(paths)
        chance = getattr(trainer.datamodule, "chance", None)  # generated tasks know theirs; else 1 / classes
        if chance is not None:
            self.record["chance"] = chance
        splits = getattr(trainer.datamodule, "splits", None) or {}  # the evaluated examples set a metric's resolution
        self.record["examples"] = {name: len(x) for name, (x, _) in splits.items()}

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fit_started = time.perf_counter()
        self._write(trainer, metrics_file.RUNNING)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.first_epoch = trainer.current_epoch  # after a resumed checkpoint is restored

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.samples += pl_module.train_samples  # this rank's training inputs of the epoch
        self._write(trainer, metrics_file.RUNNING, epochs=trainer.current_epoch + 1)

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.validated = self.validated or not trainer.sanity_checking

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        value = trainer.callback_metrics.get(pl_module.task.monitor)
        if not trainer.sanity_checking and value is not None:  # logged by the module's epoch end, which runs first
            epoch = trainer.current_epoch + 1
            self.history = [item for item in self.history if item[0] < epoch] + [[epoch, float(value)]]

    def budget(self, pl_module: pl.LightningModule) -> dict[str, Any]:
        """The checkpoint metric's history and the verdict on the budget (:func:`convergence.judge`)."""
        examples = self.record.get("examples", {}).get(pl_module.task.monitor.split("/")[0])
        judged = convergence.judge(self.history, pl_module.task.monitor, pl_module.task.mode, examples)
        return {"monitor_history": self.history, "still_improving": judged.pop("still_improving"), "convergence": judged}

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.fit_seconds = time.perf_counter() - self.fit_started
        epochs = max(1, trainer.current_epoch - self.first_epoch)  # the epochs this fit ran
        self.outcome = outcome(trainer, self.validated, self.test)
        self._write(
            trainer,
            fit_s=round(self.fit_seconds, 3),
            seconds_per_epoch=round(self.fit_seconds / epochs, 3),
            train_samples_per_s=round(self.samples * trainer.world_size / max(self.fit_seconds, 1e-9), 1),  # ranks get equal shares
            **best_score(trainer),
            **self.budget(pl_module),
            **({"status": metrics_file.TRAINED} if self.test else self.outcome),
        )

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._write(trainer, tested_epoch=getattr(pl_module, "tested_epoch", None), **self.outcome)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if isinstance(exception, (KeyboardInterrupt, SystemExit)):  # Ctrl-C, or SIGTERM via Lightning
            if trainer.world_size == 1:
                trainer.save_checkpoint(self.output_dir / "checkpoints" / "interrupted.ckpt")
            self._write(trainer, metrics_file.INTERRUPTED)
        else:
            status = metrics_file.DIVERGED if isinstance(exception, DivergedError) else metrics_file.FAILED
            self._write(trainer, status, error=explain(exception))
