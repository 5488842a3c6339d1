"""The LightningModule: trains a network on a task (:mod:`attnexp.tasks`), whatever the task."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytorch_lightning as pl
import torch
from torch import Tensor, nn
from torchmetrics import MaxMetric, MeanMetric

from attnexp.rules import check
from attnexp.tasks import Task
from attnexp.training.divergence import DivergedError, LossWatch


def monitored(task: Task, num_classes: int) -> list[str]:
    """What :class:`TaskModule` logs after each validation (the task's names, ``val/acc_best`` beside ``val/acc``):
    the metrics a checkpoint or a schedule can be chosen by."""
    names = task.logged(num_classes, "val")
    return sorted([*names, "val/acc_best"] if "val/acc" in names else names)


class TaskModule(pl.LightningModule):
    """Training of ``net`` on ``task`` (its loss and metrics) with per-epoch metrics, under Lightning's automatic
    optimization: the Trainer's ``gradient_clip_val``, ``gradient_clip_algorithm`` and ``accumulate_grad_batches`` apply
    as in any Lightning script, and the schedule steps at ``scheduler_interval`` (a plateau schedule after each
    validation, on its ``val/loss``).

    Training statistics are summed on the device and logged once per epoch, so a training step never waits on the
    host; ``trainer.log_every_n_steps > 0`` adds step-level ``train/loss_step``. Validation and test use
    torchmetrics. The losses are kept and checked every ``divergence_check_every`` batches (one host sync each time):
    when one is NaN or infinite, training then stops with :class:`DivergedError` naming the first bad step, before
    the bad weights reach a checkpoint. Checkpoints carry the RNG states, so a resumed run continues exactly as an
    uninterrupted one would.

    Logged per epoch, with the epoch (counted from 1; for test metrics the epoch of the checkpoint tested) as the x
    value: ``train/loss``, ``train/acc``, ``train/lr``, ``val/loss``, ``val/acc_best``, ``test/loss``, then the task's
    metrics under ``val/`` and ``test/`` (``acc``) and those it derives from each stage's loss (``ppl``).
    """

    net: Any  # a network of attnexp.networks: it has num_classes
    task: Task
    train_loss_sum: Tensor
    train_correct: Tensor
    train_count: int | Tensor
    tested_epoch: int | None

    def __init__(
        self,
        net: nn.Module,
        task: Task,
        optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., Any] | None = None,
        compile: bool = False,
        divergence_check_every: int = 20,
        scheduler_interval: str = "epoch",
        weight_decay_on: str = "all",
    ) -> None:
        super().__init__()
        check(
            "module",
            divergence_check_every=divergence_check_every,
            scheduler_interval=scheduler_interval,
            weight_decay_on=weight_decay_on,
        )
        self.scheduler_interval, self.weight_decay_on = scheduler_interval, weight_decay_on
        self.net, self.task = net, task
        if compile:
            net.compile()  # in place: checkpoints keep the same keys with and without compile
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.val_loss, self.test_loss = MeanMetric(), MeanMetric()
        self.val_metrics = nn.ModuleDict(task.metrics(self.net.num_classes, "val"))
        self.test_metrics = nn.ModuleDict(task.metrics(self.net.num_classes, "test"))
        self.val_acc_best = MaxMetric()
        self.val_acc_best.persistent(True)  # survives checkpoint and resume
        self.register_buffer("train_loss_sum", torch.zeros(()), persistent=False)  # sum of loss * batch size
        self.register_buffer("train_correct", torch.zeros((), dtype=torch.long), persistent=False)
        self.train_count = (
            0  # targets this epoch (tokens for a language model): an int, or a tensor for a task that skips some
        )
        self.train_samples = 0  # inputs this epoch (sequences, images)
        self.losses = LossWatch(divergence_check_every)  # the divergence check
        self.last_lr = 0.0  # the learning rate of the last optimizer step, logged as train/lr
        self.val_loss_this_epoch: Tensor | None = None  # for a plateau schedule: None when validation did not run
        self.loaded_epoch: int | None = None  # Lightning's epoch index of the checkpoint last loaded
        self.tested_epoch = None  # the epoch (from 1) whose weights the test measures

    def forward(self, x: Tensor) -> Tensor:
        """The network's logits for ``x``, called as the task calls it (an encoder-decoder decodes greedily)."""
        return self.task.forward(self.net, x)

    def setup(self, stage: str) -> None:
        datamodule = self.trainer.datamodule  # type: ignore[attr-defined]  # Lightning sets it when fit or test starts
        if datamodule is not None:
            self.task.bind(datamodule)

    def _step(self, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        x, y = batch
        return self.task.loss(self.task.forward(self.net, x, y), y)

    def on_train_epoch_start(self) -> None:
        self.train_loss_sum.zero_(), self.train_correct.zero_()
        self.train_count = self.train_samples = 0
        self.val_loss_this_epoch = None

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        """The loss of one batch; its sums for the epoch's ``train/loss`` and ``train/acc`` stay on the device."""
        self.losses.before(self.net.state_dict())  # replayed if this step's loss is the first that is not finite
        loss, logits, y = self._step(batch)
        count = self.task.count(y)  # an int, or a tensor where the task scores some targets only
        with torch.no_grad():  # small ops, no host sync
            if isinstance(count, Tensor):
                self.train_loss_sum.add_(loss.detach() * count)
            else:
                self.train_loss_sum.add_(loss.detach(), alpha=count)
            self.train_correct.add_((logits.argmax(-1) == y).sum())
        self.losses.note(self.global_step, loss, batch)
        self.train_count += count
        self.train_samples += len(batch[0])
        if self.trainer.log_every_n_steps:  # type: ignore[attr-defined]  # the Trainer's argument, kept by Lightning
            self.log("train/loss_step", loss, on_step=True, on_epoch=False, batch_size=1)
        return loss

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        self.last_lr = optimizer.param_groups[0]["lr"]

    def lr_scheduler_step(self, scheduler: Any, metric: Any) -> None:
        """A plateau schedule steps on this epoch's ``val/loss`` (an epoch without validation keeps the rate)."""
        if not isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            scheduler.step()
        elif self.val_loss_this_epoch is not None:
            scheduler.step(self.val_loss_this_epoch)

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.losses.due:
            self.check_losses()

    def check_losses(self) -> None:
        """The divergence check; a loss that is not finite is replayed to find the mixer that made the NaN first."""
        try:
            self.losses.check(self.current_epoch + 1)
        except DivergedError as err:
            try:
                with self.trainer.precision_plugin.forward_context():
                    err.origin = self.losses.replay(self.net, lambda net, batch: self.task.forward(net, *batch[:2]))
            except Exception:  # the diagnosis is a help: the divergence stands as it was said
                pass
            raise

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["rng_states"] = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            checkpoint["rng_states"]["cuda"] = torch.cuda.get_rng_state_all()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.loaded_epoch = checkpoint.get("epoch")
        states = checkpoint.get("rng_states", {})
        if "torch" in states:
            torch.set_rng_state(states["torch"])
        if "cuda" in states and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(states["cuda"])

    def on_train_epoch_end(self) -> None:
        self.check_losses()
        n = max(self.train_count, 1)  # one host sync where it is a tensor
        loss = self.train_loss_sum / n
        values: dict[str, Any] = {
            "train/loss": loss,
            "train/acc": self.train_correct / n,
            **self.task.derived("train", loss),
            "train/lr": self.last_lr,
        }
        self.log_dict({**values, **self._epoch_step()}, sync_dist=True, batch_size=1)  # one value per epoch: no weights

    def _epoch_step(self) -> dict[str, float]:
        """Lightning's ``step`` key: per-epoch curves get the epoch, counted from 1, as their x value (not the optimizer
        step); test metrics the epoch of the weights tested."""
        return {"step": float(self.tested_epoch or 0) if self.trainer.testing else float(self.current_epoch + 1)}

    def _evaluate(self, batch: tuple[Tensor, Tensor], loss_metric: MeanMetric, metrics: Any, stage: str) -> None:
        loss, logits, y = self._step(batch)
        loss_metric.update(loss, weight=self.task.count(y))
        self.task.update(metrics, logits, y, self.net, batch[0], stage)

    def _log_stage(self, stage: str, loss_metric: MeanMetric, metrics: Any) -> dict[str, Tensor]:
        """Log ``<stage>/loss``, the task's metrics and what it derives from the loss; reset them."""
        loss = loss_metric.compute()
        values = {f"{stage}/loss": loss, **{f"{stage}/{name}": m.compute() for name, m in metrics.items()}}
        self.log_dict({**values, **self.task.derived(stage, loss), **self._epoch_step()}, sync_dist=True)
        loss_metric.reset()
        for metric in metrics.values():
            metric.reset()
        return values

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._evaluate(batch, self.val_loss, self.val_metrics, "val")

    def on_validation_epoch_end(self) -> None:
        values = self._log_stage("val", self.val_loss, self.val_metrics)
        if not self.trainer.sanity_checking:
            self.val_loss_this_epoch = values["val/loss"]
        if not self.trainer.sanity_checking and "val/acc" in values:
            self.val_acc_best.update(values["val/acc"])
            self.log_dict({"val/acc_best": self.val_acc_best.compute(), **self._epoch_step()}, sync_dist=True)

    def on_test_start(self) -> None:
        """The test measures the checkpoint it loaded (``trainer.test(ckpt_path=...)``), else the weights after the
        last epoch."""
        loaded = self.loaded_epoch if self.trainer.ckpt_path is not None else None
        self.tested_epoch = self.current_epoch if loaded is None else loaded + 1

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._evaluate(batch, self.test_loss, self.test_metrics, "test")

    def on_test_epoch_end(self) -> None:
        self._log_stage("test", self.test_loss, self.test_metrics)

    def configure_optimizers(self) -> Any:
        """The optimizer (over every parameter, or with ``weight_decay_on=matrices`` a group of the weights of 2 or
        more dimensions and a group of the rest without weight decay, as GPT training does) and its schedule."""
        params: Any = self.parameters()
        if self.weight_decay_on == "matrices":
            kept = [p for p in self.parameters() if p.requires_grad]
            params = [
                {"params": [p for p in kept if p.dim() >= 2]},
                {"params": [p for p in kept if p.dim() < 2], "weight_decay": 0.0},
            ]
        optimizer = self.optimizer_factory(params=params)
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(optimizer=optimizer)
        if isinstance(
            scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau
        ):  # after each validation: lr_scheduler_step
            schedule = {"scheduler": scheduler, "interval": "epoch", "monitor": "val/loss", "strict": False}
        else:
            schedule = {"scheduler": scheduler, "interval": self.scheduler_interval}
        return {"optimizer": optimizer, "lr_scheduler": schedule}
