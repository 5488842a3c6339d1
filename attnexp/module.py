"""The LightningModule: trains a network on a task (:mod:`attnexp.tasks`), whatever the task."""

from __future__ import annotations

from typing import Any, Callable

import pytorch_lightning as pl
import torch
from torch import Tensor, nn
from torchmetrics import MaxMetric, MeanMetric

from attnexp.tasks import Task


class DivergedError(RuntimeError):
    """The training loss became NaN or infinite."""


class TaskModule(pl.LightningModule):
    """Training of ``net`` on ``task`` (its loss and metrics) with per-epoch metrics.

    Training statistics are summed on the device and logged once per epoch, so
    a training step never waits on the host; ``log_every_n_steps > 0`` adds
    step-level ``train/loss_step`` for users who ask for it. Validation and test
    use torchmetrics. A non-finite loss is noted on the device and checked every
    ``divergence_check_every`` steps (one host sync each time): training then
    stops with :class:`DivergedError` naming the first bad step, before the
    bad weights reach a checkpoint. Checkpoints carry the RNG states, so a
    resumed run continues exactly as an uninterrupted one would.

    Logged per epoch, with the epoch as the x value: ``train/loss``, ``train/acc``, ``train/lr``,
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
    ) -> None:
        super().__init__()
        self.net, self.task = net, task
        if compile:
            net.compile()  # in place: checkpoints keep the same keys with and without compile
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.log_every_n_steps = log_every_n_steps
        self.divergence_check_every = max(1, divergence_check_every)
        self.val_loss, self.test_loss = MeanMetric(), MeanMetric()
        self.val_metrics = nn.ModuleDict(task.metrics(net.num_classes))
        self.test_metrics = nn.ModuleDict(task.metrics(net.num_classes))
        self.val_acc_best = MaxMetric()
        self.val_acc_best.persistent(True)  # survives checkpoint and resume
        self.register_buffer("train_loss_sum", torch.zeros(()), persistent=False)  # sum of loss * batch size
        self.register_buffer("train_correct", torch.zeros((), dtype=torch.long), persistent=False)
        self.train_count = 0  # a Python int: batch sizes are known on the host
        self.register_buffer("first_bad_step", torch.tensor(-1), persistent=False)

    def __setattr__(self, name: str, value: Any) -> None:
        """Plain attributes that already exist are set directly, skipping nn.Module's parameter,
        module and buffer bookkeeping: Lightning sets a few (the running hook's name) around every
        hook, about 40 times a training step, which cost 3-5% of a small model's step."""
        if name in self.__dict__ and not isinstance(value, (Tensor, nn.Module)):
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def _step(self, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        x, y = batch
        return self.task.loss(self.net(x), y)

    def on_train_epoch_start(self) -> None:
        self.train_loss_sum.zero_(), self.train_correct.zero_()
        self.train_count = 0

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        loss, logits, y = self._step(batch)
        with torch.no_grad():  # small ops, no host sync
            self.train_loss_sum.add_(loss.detach(), alpha=y.numel())
            self.train_correct.add_((logits.argmax(-1) == y).sum())
            bad = ~torch.isfinite(loss.detach()) & (self.first_bad_step < 0)
            self.first_bad_step.copy_(torch.where(bad, self.global_step, self.first_bad_step))
        self.train_count += y.numel()
        if self.log_every_n_steps and batch_idx % self.log_every_n_steps == 0:
            self.log("train/loss_step", loss.detach(), on_step=True, on_epoch=False)
        return loss

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        last = batch_idx + 1 == self.trainer.num_training_batches
        if last or (batch_idx + 1) % self.divergence_check_every == 0:
            self._check_finite()

    def _check_finite(self) -> None:
        step = int(self.first_bad_step)
        if step >= 0:
            kept = ("checkpoints/last.ckpt still holds the last good epoch" if self.current_epoch > 0
                    else "no epoch had finished, so no checkpoint was written")
            raise DivergedError(
                f"The training loss became NaN or infinite at step {step} (epoch {self.current_epoch}). "
                f"Training stopped; {kept}. Usual causes: "
                "a learning rate that is too high (module.optimizer.lr), or 16-bit precision overflow "
                "(try trainer.precision=32-true or bf16-mixed); trainer.gradient_clip_val=1.0 also helps."
            )

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["rng_states"] = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            checkpoint["rng_states"]["cuda"] = torch.cuda.get_rng_state_all()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        states = checkpoint.get("rng_states", {})
        if "torch" in states:
            torch.set_rng_state(states["torch"])
        if "cuda" in states and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(states["cuda"])

    def on_train_epoch_end(self) -> None:
        self._check_finite()
        n = max(self.train_count, 1)
        loss = self.train_loss_sum / n
        lr = self.trainer.optimizers[0].param_groups[0]["lr"]  # the rate this epoch trained with (schedulers step after)
        values = {"train/loss": loss, "train/acc": self.train_correct / n, **self.task.derived("train", loss), "train/lr": lr}
        self.log_dict({**values, **self._epoch_step()}, sync_dist=True)

    def _epoch_step(self) -> dict[str, float]:
        """Lightning's ``step`` key: per-epoch curves get the epoch as their x value, not the optimizer step."""
        return {"step": float(self.current_epoch)}

    def _evaluate(self, batch: tuple[Tensor, Tensor], loss_metric: MeanMetric, metrics: nn.ModuleDict) -> None:
        loss, logits, y = self._step(batch)
        loss_metric.update(loss, weight=y.numel())
        for metric in metrics.values():
            metric.update(logits, y)

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
        self._evaluate(batch, self.val_loss, self.val_metrics)

    def on_validation_epoch_end(self) -> None:
        values = self._log_stage("val", self.val_loss, self.val_metrics)
        if not self.trainer.sanity_checking and "val/acc" in values:
            self.val_acc_best.update(values["val/acc"])
            self.log_dict({"val/acc_best": self.val_acc_best.compute(), **self._epoch_step()}, sync_dist=True)

    def test_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self._evaluate(batch, self.test_loss, self.test_metrics)

    def on_test_epoch_end(self) -> None:
        self._log_stage("test", self.test_loss, self.test_metrics)

    def configure_optimizers(self) -> Any:
        optimizer = self.optimizer_factory(params=self.parameters())
        if self.scheduler_factory is None:
            return optimizer
        scheduler = self.scheduler_factory(optimizer=optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "epoch", "monitor": "val/loss", "strict": False}}  # an epoch without validation keeps the rate
