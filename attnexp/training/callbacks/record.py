"""The callback that keeps a run's record up to date (:class:`attnexp.runs.record.RunRecord`, ``metrics.json``)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytorch_lightning as pl
import torch

from attnexp.errors import explain, is_disk_full
from attnexp.mixers import MultiHeadAttention
from attnexp.mixers.declared import built_causal, weight_kinds
from attnexp.runs import metrics_file, provenance, resolution, trackers
from attnexp.runs.folders import checkpoints_of
from attnexp.runs.record import RunRecord
from attnexp.training.divergence import DivergedError
from attnexp.training.threads import ThreadRule

log = logging.getLogger("attnexp")


def what_ran(trainer: pl.Trainer, pl_module: Any) -> dict[str, Any]:
    """What the run trains besides its settings: parameters, batch sizes, the task's metrics, the attention path, the
    mixers' causality and kind of weights, the data's chance level and evaluated examples, the software and the
    device."""
    task, datamodule = pl_module.task, getattr(trainer, "datamodule", None)  # Any: the data module's facts are its own
    params, summary = sum(p.numel() for p in pl_module.parameters()), list(task.summary.items())
    facts: dict[str, Any] = {
        "params": params,
        "classes": pl_module.net.num_classes,
        "summary": summary,
        "monitor": task.monitor,
    }
    facts["mode"], batch, device = task.mode, getattr(datamodule, "batch_size", None), trainer.strategy.root_device
    if isinstance(batch, int):  # per device; data-parallel devices and accumulated batches make one optimizer step
        facts.update(
            batch_size=batch, effective_batch_size=batch * trainer.world_size * trainer.accumulate_grad_batches
        )
    paths = sorted({m.path_for(device) for m in pl_module.net.modules() if isinstance(m, MultiHeadAttention)})
    if paths:  # the path that trains (model.path; explicit while dropout is on and the fused path has none)
        facts["path"] = ",".join(paths)
    facts["causal"] = built_causal(pl_module.net)  # as the network built its mixers, whatever model.causal says
    facts["weight_kind"] = weight_kinds(pl_module.net)  # what the mixers' weights are: how telemetry reads them
    chance = getattr(datamodule, "chance", None)  # generated tasks know theirs; else 1 / classes
    facts |= {} if chance is None else {"chance": chance}
    splits = getattr(datamodule, "splits", None) or {}  # the evaluated examples set a metric's resolution
    facts["examples"] = {name: len(x) for name, (x, _) in splits.items()}
    facts["scored"] = task.scored(splits)  # per split, the predictions each accuracy counts (tokens, not windows)
    return {**facts, "software": provenance.software(), "device": provenance.device(device, trainer.num_devices)}


def threads_used(trainer: pl.Trainer) -> dict[str, Any]:
    """The threads training runs on, once fitting starts (the thread rule chooses then), and why."""
    rule = next((c for c in trainer.callbacks if isinstance(c, ThreadRule)), None)  # type: ignore[attr-defined]
    return {"threads": torch.get_num_threads(), **({} if rule is None else {"threads_why": rule.why})}


def describe(fields: dict[str, Any], trainer: pl.Trainer, pl_module: Any) -> str:
    """What is about to train: mixer, data, network, parameters, epochs and the batch of one optimizer step."""
    batch, step = fields.get("batch_size"), fields.get("effective_batch_size")
    per_step = f"batches of {batch}" + (f" per device, {step} per optimizer step" if step not in (None, batch) else "")
    epochs = f"{trainer.max_epochs} epochs" if (trainer.max_epochs or 0) > 0 else f"{trainer.max_steps} steps"
    return (
        f"Training {fields.get('mixer')} on {fields.get('data')}: {type(pl_module.net).__name__}, "
        f"{fields['params']:,} parameters; {epochs}, {per_step}."
    )


def outcome(trainer: pl.Trainer, validated: bool, test: bool) -> dict[str, str]:
    """How a finished fit ends: ``ok``; ``untrained`` when no training batch ran; ``unvalidated`` when no validation
    ran (no best checkpoint was chosen: the test measures the last weights). With ``error`` saying why."""
    what = "the test measured" if test else "the run holds"
    if trainer.global_step == 0:
        limit = f"trainer.limit_train_batches={trainer.limit_train_batches}"
        return {
            "status": metrics_file.UNTRAINED,
            "error": f"no training batch ran ({limit}), so {what} the initial weights.",
        }
    if not validated and "monitor_best" not in best_score(trainer):
        limits = (
            f"trainer.limit_val_batches={trainer.limit_val_batches}, trainer.check_val_every_n_epoch="
            f"{trainer.check_val_every_n_epoch}, {trainer.current_epoch} epochs"
        )
        error = f"no validation ran ({limits}), so no best checkpoint was chosen and {what} the last weights."
        return {"status": metrics_file.UNVALIDATED, "error": error}
    return {"status": metrics_file.OK}


def leaked(fields: dict[str, Any]) -> dict[str, str]:
    """``invalid``, with why, where the trained network was found reading later tokens or a trained mixer failed its
    certification on the run's own data (the record's ``causality`` and ``certification``,
    :class:`~attnexp.training.callbacks.causality.CausalityCheck`); else nothing."""
    found = fields.get("causality") or {}
    if found.get("leak"):
        return {"status": metrics_file.INVALID, "error": found["error"]}
    certified = fields.get("certification") or {}
    return {"status": metrics_file.INVALID, "error": certified["error"]} if "error" in certified else {}


def best_score(trainer: pl.Trainer) -> dict[str, Any]:
    """``monitor_best``: the best value of the task's checkpoint metric, the one the tested checkpoint has; and
    ``best_checkpoint``, that checkpoint's file (``attnexp-predict checkpoint=best``)."""
    callback = trainer.checkpoint_callback
    score, path = getattr(callback, "best_model_score", None), getattr(callback, "best_model_path", "")
    return ({} if score is None else {"monitor_best": float(score)}) | ({"best_checkpoint": path} if path else {})


class RecordKeeper(pl.Callback):
    """Keeps every run's record up to date: its status as it goes (``running``, ``trained``, ``ok``; ``untrained``,
    ``unvalidated`` or ``invalid`` with ``error``; ``failed``, ``diverged`` or ``interrupted`` with
    ``interrupted.ckpt``), what ran (:func:`what_ran`), the final metrics, the checkpoint metric after each
    validation (``monitor_history``, kept in checkpoints for a resumed run) and whether the budget ended while still
    improving. ``announce``: log what is about to train."""

    def __init__(self, record: RunRecord, test: bool = True, announce: bool = False) -> None:
        self.record, self.test, self.announce = record, test, announce
        self.started = time.perf_counter()
        self.fit_started, self.first_epoch, self.samples, self.validated = 0.0, 0, 0, False
        self.outcome: dict[str, Any] = {"status": metrics_file.OK}
        self.history: list[list[float]] = []  # [epoch, value of the task's checkpoint metric] after each validation
        self.described = False

    def state_dict(self) -> dict[str, Any]:
        return {"monitor_history": self.history}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = [list(item) for item in state_dict.get("monitor_history", [])]

    def _write(self, trainer: pl.Trainer, status: Any = metrics_file.OK, **fields: Any) -> None:
        if "device" in self.record.fields and trainer.state.fn == "fit":  # the thread rule may change them as it goes
            self.record.fields["device"] |= threads_used(trainer)
        metrics = metrics_file.final_metrics(trainer.callback_metrics)
        fields = {**metrics, "status": status, "wall_s": round(time.perf_counter() - self.started, 3), **fields}
        if trainer.is_global_zero:
            self.record.write(**fields)
        else:
            self.record.fields.update(fields)

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        if not self.described:
            self.described = True
            self.record.fields.update(what_ran(trainer, pl_module))
            if self.announce:
                log.info(describe(self.record.fields, trainer, pl_module))

    def on_fit_start(self, trainer: pl.Trainer, pl_module: Any) -> None:  # after the thread rule's
        self.fit_started = time.perf_counter()
        self._write(trainer, metrics_file.RUNNING)

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.first_epoch = trainer.current_epoch  # after a resumed checkpoint is restored

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.samples += pl_module.train_samples  # this rank's training inputs of the epoch
        self._write(trainer, metrics_file.RUNNING, epochs=trainer.current_epoch + 1)

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.validated = self.validated or not trainer.sanity_checking

    def on_validation_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        value = trainer.callback_metrics.get(pl_module.task.monitor)
        if not trainer.sanity_checking and value is not None:  # logged by the module's epoch end, which runs first
            epoch = trainer.current_epoch + 1
            self.history = [item for item in self.history if item[0] < epoch] + [[epoch, float(value)]]

    def on_fit_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        seconds = time.perf_counter() - self.fit_started
        epochs = max(1, trainer.current_epoch - self.first_epoch)  # the epochs this fit ran
        monitor = pl_module.task.monitor
        judged = resolution.judge(
            self.history,
            monitor,
            pl_module.task.mode,
            resolution.scored_units(self.record.fields, monitor),
        )
        self.outcome = outcome(trainer, self.validated, self.test) | leaked(self.record.fields)
        self._write(
            trainer,
            fit_s=round(seconds, 3),
            seconds_per_epoch=round(seconds / epochs, 3),
            train_samples_per_s=round(self.samples * trainer.world_size / max(seconds, 1e-9), 1),  # equal shares
            **best_score(trainer),
            monitor_history=self.history,
            still_improving=judged.pop("still_improving"),
            convergence=judged,
            **({"status": metrics_file.TRAINED} if self.test else self.outcome),
        )
        if not self.test:
            self._ended(trainer)

    def on_test_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        final = self.outcome | leaked(self.record.fields)  # the tested weights were checked when the test started
        self._write(trainer, tested_epoch=getattr(pl_module, "tested_epoch", None), **final)
        self._ended(trainer)

    def _ended(self, trainer: pl.Trainer) -> None:
        """The run's end in its trackers (:func:`attnexp.runs.trackers.ended`), once the record says how it ended."""
        if trainer.is_global_zero:
            trackers.ended(trainer.loggers, self.record)

    def on_exception(self, trainer: pl.Trainer, pl_module: Any, exception: BaseException) -> None:
        if isinstance(exception, (KeyboardInterrupt, SystemExit)):  # Ctrl-C, or SIGTERM via Lightning
            if trainer.world_size == 1:
                trainer.save_checkpoint(checkpoints_of(self.record.folder, self.record.fields) / "interrupted.ckpt")
            self._write(trainer, metrics_file.INTERRUPTED)
            self._ended(trainer)
        elif not is_disk_full(exception):  # a full disk: the command's failure path writes the record once, explained
            status = metrics_file.DIVERGED if isinstance(exception, DivergedError) else metrics_file.FAILED
            self._write(trainer, status, error=explain(exception))
            self._ended(trainer)  # the command's failure path gives MLflow's run its end (trackers.stopped)
