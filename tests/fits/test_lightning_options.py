"""The module trains under Lightning's automatic optimization: the Trainer's clipping and accumulation act as in a
plain Lightning script, schedules step at their interval, ``max_steps`` counts optimizer steps, and a run resumed from
its last checkpoint equals an uninterrupted one, with dropout and random noise after the transfer in play."""

from __future__ import annotations

from functools import partial

import pytest
import pytorch_lightning as pl
import torch
import torch.nn.functional as F

from attnexp.data import DigitsDataModule
from attnexp.mixers import DotAttention
from attnexp.networks import PatchClassifier
from attnexp.tasks import ImageClassification
from attnexp.training.module import TaskModule


class NoisyDigits(DigitsDataModule):
    """Digits whose training batches get random noise after the move to the device (draws from the global RNG)."""

    def on_after_batch_transfer(self, batch, dataloader_idx):
        x, y = batch
        if self.trainer is not None and self.trainer.training:
            x = x + 0.1 * torch.randn_like(x)
        return x, y


def network() -> PatchClassifier:
    return PatchClassifier(
        partial(DotAttention, heads=2),
        image_size=8,
        channels=1,
        patch_size=2,
        num_classes=10,
        dim=8,
        depth=2,
        prenorm=True,
        dropout=0.2,
    )


def trainer(tmp_path, **settings) -> pl.Trainer:
    return pl.Trainer(
        logger=False,
        enable_model_summary=False,
        enable_progress_bar=False,
        deterministic=True,
        default_root_dir=tmp_path,
        num_sanity_val_steps=0,
        **settings,
    )


class PlainScript(pl.LightningModule):
    """A Lightning module as its documentation writes one: the loss returned, the Trainer does the rest."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


def fit(
    tmp_path, max_epochs: int = 2, max_steps: int = -1, scheduler=None, checkpoints: bool = True, **settings
) -> tuple[pl.Trainer, TaskModule]:
    pl.seed_everything(0, verbose=False)
    dm = NoisyDigits(patch_size=2, val_size=180, batch_size=32)  # 40 training batches, the last one short
    interval = settings.pop("scheduler_interval", "epoch")
    module = TaskModule(
        network(),
        ImageClassification(),
        optimizer=partial(torch.optim.AdamW, lr=3e-3),
        scheduler=scheduler,
        scheduler_interval=interval,
    )
    callbacks = [pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)] if checkpoints else []
    run = trainer(
        tmp_path,
        max_epochs=max_epochs,
        max_steps=max_steps,
        callbacks=callbacks,
        enable_checkpointing=checkpoints,
        **settings,
    )
    run.fit(module, datamodule=dm)
    return run, module


@pytest.mark.parametrize(
    "settings",
    [
        {"gradient_clip_val": 1.0},
        {"accumulate_grad_batches": 4},
        {"gradient_clip_val": 0.01, "gradient_clip_algorithm": "value", "accumulate_grad_batches": 3},
    ],
    ids=["clip-norm", "accumulate", "clip-value-and-accumulate"],
)
def test_trainer_clipping_and_accumulation_train_as_a_plain_lightning_script(settings, tmp_path):
    """The same weights, to the bit, as a plain Lightning module under the same Trainer settings; and other weights
    than without them (the settings took effect)."""
    _, ours = fit(tmp_path, max_epochs=1, checkpoints=False, **settings)
    pl.seed_everything(0, verbose=False)
    plain = PlainScript(network())
    trainer(tmp_path, max_epochs=1, enable_checkpointing=False, **settings).fit(
        plain, datamodule=NoisyDigits(patch_size=2, val_size=180, batch_size=32)
    )
    _, without = fit(tmp_path, max_epochs=1, checkpoints=False)
    for (name, a), b in zip(ours.net.state_dict().items(), plain.net.state_dict().values()):
        assert torch.equal(a, b), name
    assert not all(torch.equal(a, c) for a, c in zip(ours.net.parameters(), without.net.parameters()))


def test_global_step_counts_optimizer_steps(tmp_path):
    assert fit(tmp_path, max_epochs=1, checkpoints=False)[0].global_step == 40  # one per batch
    trained, module = fit(tmp_path, max_epochs=1, checkpoints=False, accumulate_grad_batches=3)
    assert trained.global_step == 14 and module.train_count == 1257  # 13 full windows and the epoch's last batch
    assert fit(tmp_path, max_epochs=3, max_steps=13, checkpoints=False)[0].global_step == 13


def test_schedules_step_at_their_interval(tmp_path):
    trained, _ = fit(
        tmp_path,
        max_epochs=1,
        scheduler_interval="step",
        checkpoints=False,
        scheduler=partial(torch.optim.lr_scheduler.StepLR, step_size=10, gamma=0.5),
    )
    assert trained.optimizers[0].param_groups[0]["lr"] == pytest.approx(3e-3 * 0.5**4)  # 40 steps
    trained, _ = fit(
        tmp_path,
        max_epochs=3,
        checkpoints=False,
        scheduler=partial(torch.optim.lr_scheduler.StepLR, step_size=1, gamma=0.5),
    )
    assert trained.optimizers[0].param_groups[0]["lr"] == pytest.approx(3e-3 * 0.5**3)
    assert float(trained.callback_metrics["train/lr"]) == pytest.approx(
        3e-3 * 0.5**2
    )  # the rate the last epoch trained with


def test_a_plateau_schedule_steps_on_each_validation_and_keeps_the_rate_without_one(tmp_path):
    plateau = partial(torch.optim.lr_scheduler.ReduceLROnPlateau, patience=0, factor=0.5, threshold=10.0)
    trained, _ = fit(tmp_path, max_epochs=3, checkpoints=False, scheduler=plateau)  # never 10x better: halved each time
    assert trained.optimizers[0].param_groups[0]["lr"] == pytest.approx(3e-3 * 0.5**3)
    trained, _ = fit(tmp_path, max_epochs=4, checkpoints=False, scheduler=plateau, check_val_every_n_epoch=2)
    assert trained.optimizers[0].param_groups[0]["lr"] == pytest.approx(3e-3 * 0.5**2)  # validated twice


@pytest.mark.parametrize(
    "scheduler", [partial(torch.optim.lr_scheduler.CosineAnnealingLR, T_max=3), None], ids=["cosine", "none"]
)
def test_resuming_from_last_checkpoint_equals_an_uninterrupted_run(scheduler, tmp_path):
    whole, whole_module = fit(tmp_path / "whole", max_epochs=3, scheduler=scheduler)
    first, _ = fit(tmp_path / "part", max_epochs=1, scheduler=scheduler)
    pl.seed_everything(1, verbose=False)  # the checkpoint's RNG state must win over this
    module = TaskModule(
        network(), ImageClassification(), optimizer=partial(torch.optim.AdamW, lr=3e-3), scheduler=scheduler
    )
    resumed = trainer(tmp_path, max_epochs=3, callbacks=[pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "resumed")])
    resumed.fit(
        module,
        datamodule=NoisyDigits(patch_size=2, val_size=180, batch_size=32),
        ckpt_path=first.checkpoint_callback.last_model_path,
    )
    assert resumed.global_step == whole.global_step
    for (name, a), b in zip(whole_module.state_dict().items(), module.state_dict().values()):
        assert torch.equal(a, b), name
    sa, sb = whole.optimizers[0].state_dict()["state"], resumed.optimizers[0].state_dict()["state"]
    assert all(torch.equal(sa[i]["exp_avg_sq"], sb[i]["exp_avg_sq"]) for i in sa)
    for key, value in whole.callback_metrics.items():
        assert torch.equal(value, resumed.callback_metrics[key]), key


def test_clipping_bounds_every_update(tmp_path):
    """With SGD (lr 1) and the gradient norm clipped to 1e-4 on the Trainer, no weight moves more than steps x 1e-4."""
    pl.seed_everything(0, verbose=False)
    net = PatchClassifier(partial(DotAttention, heads=1), image_size=8, channels=1, patch_size=2, num_classes=10)
    before = torch.cat([p.detach().flatten().clone() for p in net.parameters()])
    module = TaskModule(net, ImageClassification(), optimizer=partial(torch.optim.SGD, lr=1.0))
    run = trainer(tmp_path, max_epochs=1, enable_checkpointing=False, gradient_clip_val=1e-4)
    run.fit(module, datamodule=DigitsDataModule(patch_size=2, val_size=180, batch_size=32))
    moved = (torch.cat([p.detach().flatten() for p in net.parameters()]) - before).norm()
    assert 0 < moved <= run.global_step * 1e-4 * (1 + 1e-4)


def test_bad_settings_are_refused():
    for bad in ({"scheduler_interval": "batch"}, {"weight_decay_on": "biases"}):
        with pytest.raises(Exception, match=f"module.{next(iter(bad))}="):
            TaskModule(network(), ImageClassification(), optimizer=partial(torch.optim.Adam), **bad)
