"""The LightningModule: trains a network on a task (:mod:`attnexp.tasks`), whatever the task."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytorch_lightning as pl
import torch
from torch import Tensor, nn
from torchmetrics import MaxMetric, MeanMetric

from attnexp.divergence import LossWatch
from attnexp.rules import check
from attnexp.tasks import Task

# training_step takes the loader's iterator on purpose; Lightning warns that this is experimental and batch_idx approximate.
warnings.filterwarnings("ignore", message=r".*`dataloader_iter`", module="pytorch_lightning")


class TaskModule(pl.LightningModule):
    """Training of ``net`` on ``task`` (its loss and metrics) with per-epoch metrics.

    Each call of :meth:`training_step` trains on up to ``steps_per_call`` batches, one optimizer step
    each (per ``accumulate_grad_batches``), with the updates of one batch per call: Lightning's fixed
    cost per call is paid once for all. The module steps the optimizer itself (manual optimization),
    so it owns clipping, accumulation and the schedule; ``global_step`` counts optimizer steps.

    Training statistics are summed on the device and logged once per epoch, so
    a training step never waits on the host; ``log_every_n_steps > 0`` adds
    step-level ``train/loss_step`` for users who ask for it. Validation and test
    use torchmetrics. The losses are kept and checked every ``divergence_check_every``
    batches (one host sync each time): when one is NaN or infinite, training then
    stops with :class:`DivergedError` naming the first bad step, before the
    bad weights reach a checkpoint. Checkpoints carry the RNG states, so a
    resumed run continues exactly as an uninterrupted one would.

    Logged per epoch, with the epoch (counted from 1; for test metrics the epoch of the checkpoint tested) as the x
    value: ``train/loss``, ``train/acc``, ``train/lr``,
    ``val/loss``, ``val/acc_best``, ``test/loss``, then the task's metrics under ``val/`` and
    ``test/`` (``acc``) and those it derives from each stage's loss (``ppl``).
    """

    def __init__(
        self,
        net: nn.Module,
        task: Task,
        optimizer: Callable[..., torch.optim.Optimizer],
        scheduler: Callable[..., Any] | None = None,
        compile: bool = False,
        log_every_n_steps: int = 0,
        divergence_check_every: int = 20,
        steps_per_call: int = 8,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str = "norm",
        accumulate_grad_batches: int = 1,
        scheduler_interval: str = "epoch",
        weight_decay_on: str = "all",
    ) -> None:
        super().__init__()
        check("module", steps_per_call=steps_per_call, accumulate_grad_batches=accumulate_grad_batches,
              gradient_clip_val=gradient_clip_val, gradient_clip_algorithm=gradient_clip_algorithm,
              scheduler_interval=scheduler_interval, weight_decay_on=weight_decay_on)
        self.automatic_optimization = False  # several optimizer steps per call: see training_step
        self.steps_per_call, self.accumulate_grad_batches = steps_per_call, accumulate_grad_batches
        self.gradient_clip_val, self.gradient_clip_algorithm = gradient_clip_val, gradient_clip_algorithm
        self.scheduler_interval, self.weight_decay_on = scheduler_interval, weight_decay_on
        self.net, self.task = net, task
        if compile:
            net.compile()  # in place: checkpoints keep the same keys with and without compile
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.log_every_n_steps = log_every_n_steps
        self.val_loss, self.test_loss = MeanMetric(), MeanMetric()
        self.val_metrics = nn.ModuleDict(task.metrics(net.num_classes, "val"))
        self.test_metrics = nn.ModuleDict(task.metrics(net.num_classes, "test"))
        self.val_acc_best = MaxMetric()
        self.val_acc_best.persistent(True)  # survives checkpoint and resume
        self.register_buffer("train_loss_sum", torch.zeros(()), persistent=False)  # sum of loss * batch size
        self.register_buffer("train_correct", torch.zeros((), dtype=torch.long), persistent=False)
        self.train_count = 0  # targets this epoch (tokens for a language model): an int, or a tensor for a task that skips some
        self.train_samples = 0  # inputs this epoch (sequences, images)
        self.losses = LossWatch(divergence_check_every)  # the divergence check
        self.last_lr = 0.0  # the learning rate of the last optimizer step, logged as train/lr
        self.val_loss_this_epoch: Tensor | None = None  # for a plateau schedule: None when validation did not run
        self.loaded_epoch: int | None = None  # Lightning's epoch index of the checkpoint last loaded
        self.tested_epoch: int | None = None  # the epoch (from 1) whose weights the test measures

    def __setattr__(self, name: str, value: Any) -> None:
        """Plain attributes that already exist are set directly, skipping nn.Module's parameter,
        module and buffer bookkeeping: Lightning sets a few (the running hook's name) around every
        hook, about 40 times a training step, which cost 3-5% of a small model's step."""
        if name in self.__dict__ and not isinstance(value, (Tensor, nn.Module)):
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def forward(self, x: Tensor) -> Tensor:
        """The network's logits for ``x``, called as the task calls it (an encoder-decoder decodes greedily)."""
        return self.task.forward(self.net, x)

    def setup(self, stage: str) -> None:
        if self.trainer.datamodule is not None:
            self.task.bind(self.trainer.datamodule)

    def _step(self, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        x, y = batch
        return self.task.loss(self.task.forward(self.net, x, y), y)

    def on_train_epoch_start(self) -> None:
        self.train_loss_sum.zero_(), self.train_correct.zero_()
        self.train_count = self.train_samples = 0

    def training_step(self, dataloader_iter: Iterator) -> None:
        """Train on the loader's next ``steps_per_call`` batches (fewer at the end of the epoch or of ``max_steps``).

        Each batch goes through the same hooks as in Lightning's own loop (``on_before_batch_transfer``,
        the move to the device, ``on_after_batch_transfer``) just before its own step, so random
        augmentation and dropout draw their numbers in the same order whatever ``steps_per_call`` is.
        """
        trainer, optimizer = self.trainer, self.optimizers()
        for _ in range(self._batches_per_call()):
            if dataloader_iter.done or 0 <= trainer.max_steps <= self.global_step:
                break
            batch, batch_idx, _ = next(dataloader_iter)
            batch = self._on_before_batch_transfer(trainer.precision_plugin.convert_input(batch))
            self._train_on(trainer.strategy.batch_to_device(batch), optimizer, batch_idx, last=dataloader_iter.done)

    def _batches_per_call(self) -> int:
        """``steps_per_call``, or 1 where Lightning needs a call per batch: data-parallel training (each DDP
        forward must meet its own backward) and validation by batch count (Lightning counts calls)."""
        trainer = self.trainer
        by_batches = trainer.val_check_batch is not None and (
            trainer.val_check_batch < trainer.num_training_batches or trainer.check_val_every_n_epoch is None)
        return 1 if trainer.world_size > 1 or by_batches else self.steps_per_call

    def _train_on(self, batch: tuple[Tensor, Tensor], optimizer: Any, batch_idx: int, last: bool) -> None:
        """Forward and backward on one batch; an optimizer step every ``accumulate_grad_batches`` batches and at the
        epoch's last batch (as Lightning steps), with clipping (:meth:`on_before_optimizer_step`) and a per-step schedule."""
        loss, logits, y = self._step(batch)
        count = self.task.count(y)  # an int, or a tensor where the task scores some targets only
        with torch.no_grad():  # small ops, no host sync
            if isinstance(count, Tensor):
                self.train_loss_sum.add_(loss.detach() * count)
            else:
                self.train_loss_sum.add_(loss.detach(), alpha=count)
            self.train_correct.add_((logits.argmax(-1) == y).sum())
        self.losses.note(self.global_step, loss)
        self.train_count += count
        self.train_samples += len(batch[0])
        self.manual_backward(loss / self.accumulate_grad_batches if self.accumulate_grad_batches > 1 else loss)
        if last or (batch_idx + 1) % self.accumulate_grad_batches == 0:
            if self.log_every_n_steps and self.global_step % self.log_every_n_steps == 0:
                for logger in self.loggers:  # directly: Lightning would log once per call
                    logger.log_metrics({"train/loss_step": loss.item()}, step=self.global_step)
            self.last_lr = optimizer.param_groups[0]["lr"]
            optimizer.step()  # counts global_step
            optimizer.zero_grad()
            if self.scheduler_interval == "step" or last:  # an epoch schedule steps after the epoch's last batch, as in
                self._step_scheduler(plateau=False)        # Lightning's loop: before validation and its checkpoint

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Clip after the gradients are complete (and unscaled, in 16-bit precision), as Lightning's automatic loop does."""
        if self.gradient_clip_val:
            self.clip_gradients(optimizer, self.gradient_clip_val, self.gradient_clip_algorithm)

    def _step_scheduler(self, plateau: bool) -> None:
        """Step the schedule if it is (``plateau``: on this epoch's ``val/loss``) or is not a plateau schedule."""
        scheduler = self.lr_schedulers()
        if scheduler is None or isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau) != plateau:
            return
        if not plateau:
            scheduler.step()
        elif self.val_loss_this_epoch is not None:  # an epoch without validation keeps the rate
            scheduler.step(self.val_loss_this_epoch)

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.losses.due:
            self.losses.check(self.current_epoch + 1)

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
        self.losses.check(self.current_epoch + 1)
        n = max(self.train_count, 1)  # one host sync where it is a tensor
        loss = self.train_loss_sum / n
        values = {"train/loss": loss, "train/acc": self.train_correct / n, **self.task.derived("train", loss), "train/lr": self.last_lr}
        self.log_dict({**values, **self._epoch_step()}, sync_dist=True, batch_size=1)  # one value per epoch: no weights
        self._step_scheduler(plateau=True)  # after this epoch's validation
        self.val_loss_this_epoch = None

    def _epoch_step(self) -> dict[str, float]:
        """Lightning's ``step`` key: per-epoch curves get the epoch, counted from 1, as their x value (not the optimizer
        step); test metrics the epoch of the weights tested."""
        return {"step": float(self.tested_epoch if self.trainer.testing else self.current_epoch + 1)}

    def _evaluate(self, batch: tuple[Tensor, Tensor], loss_metric: MeanMetric, metrics: nn.ModuleDict, stage: str) -> None:
        loss, logits, y = self._step(batch)
        loss_metric.update(loss, weight=self.task.count(y))
        self.task.update(metrics, logits, y, self.net, batch[0], stage)

    def _log_stage(self, stage: str, loss_metric: MeanMetric, metrics: nn.ModuleDict) -> dict[str, Tensor]:
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
        """The test measures the checkpoint it loaded (``trainer.test(ckpt_path=...)``), else the weights after the last epoch."""
        tested = self.trainer.ckpt_path is not None and self.loaded_epoch is not None
        self.tested_epoch = self.loaded_epoch + 1 if tested else self.current_epoch

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
            params = [{"params": [p for p in kept if p.dim() >= 2]}, {"params": [p for p in kept if p.dim() < 2], "weight_decay": 0.0}]
        optimizer = self.optimizer_factory(params=params)
        if self.scheduler_factory is None:
            return optimizer
        return {"optimizer": optimizer, "lr_scheduler": self.scheduler_factory(optimizer=optimizer)}  # stepped by _step_scheduler
