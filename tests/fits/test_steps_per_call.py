"""Several optimizer steps per Lightning call: the same steps, in the same order, as one per call.

Each case trains the same seeded model with ``steps_per_call`` 1 and 8 (and an uneven 3) and requires
bit-identical weights, optimizer state and metrics, with dropout, random noise added after the transfer,
clipping, accumulation and both kinds of schedule in play.
"""

from __future__ import annotations

from functools import partial

import pytest
import pytorch_lightning as pl
import torch

from attnexp.data import DigitsDataModule
from attnexp.mixers import DotAttention
from attnexp.module import TaskModule
from attnexp.networks import PatchClassifier
from attnexp.tasks import ImageClassification


class NoisyDigits(DigitsDataModule):
    """Digits whose training batches get random noise after the move to the device (draws from the global RNG)."""

    def on_after_batch_transfer(self, batch, dataloader_idx):
        x, y = batch
        if self.trainer is not None and self.trainer.training:
            x = x + 0.1 * torch.randn_like(x)
        return x, y


def fit(steps_per_call: int, tmp_path, max_epochs: int = 2, max_steps: int = -1, limit: float | int = 1.0,
        scheduler=None, **module_args) -> tuple[pl.Trainer, TaskModule]:
    pl.seed_everything(0, verbose=False)
    dm = NoisyDigits(patch_size=2, val_size=180, batch_size=32)  # 40 training batches, the last one short
    net = PatchClassifier(partial(DotAttention, heads=2), image_size=8, channels=1, patch_size=2, num_classes=10,
                          dim=8, depth=2, prenorm=True, dropout=0.2)
    module = TaskModule(net, ImageClassification(), optimizer=partial(torch.optim.AdamW, lr=3e-3), scheduler=scheduler,
                        steps_per_call=steps_per_call, **module_args)
    checkpoint = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / f"k{steps_per_call}", save_last=True)
    trainer = pl.Trainer(max_epochs=max_epochs, max_steps=max_steps, limit_train_batches=limit, logger=False,
                         callbacks=[checkpoint], enable_model_summary=False, deterministic=True,
                         default_root_dir=tmp_path, num_sanity_val_steps=0)
    trainer.fit(module, datamodule=dm)
    return trainer, module


def assert_same_training(a: tuple[pl.Trainer, TaskModule], b: tuple[pl.Trainer, TaskModule]) -> None:
    (ta, ma), (tb, mb) = a, b
    assert ta.global_step == tb.global_step
    for (name, pa), pb in zip(ma.state_dict().items(), mb.state_dict().values()):
        assert torch.equal(pa, pb), name
    sa, sb = ta.optimizers[0].state_dict()["state"], tb.optimizers[0].state_dict()["state"]
    assert all(torch.equal(sa[i]["exp_avg_sq"], sb[i]["exp_avg_sq"]) for i in sa)
    assert ta.optimizers[0].param_groups[0]["lr"] == tb.optimizers[0].param_groups[0]["lr"]
    for key, value in ta.callback_metrics.items():
        assert torch.equal(value, tb.callback_metrics[key]), key
    last_a = torch.load(ta.checkpoint_callback.last_model_path, weights_only=False)
    last_b = torch.load(tb.checkpoint_callback.last_model_path, weights_only=False)
    assert last_a["global_step"] == last_b["global_step"]
    assert all(torch.equal(v, last_b["state_dict"][k]) for k, v in last_a["state_dict"].items())


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"gradient_clip_val": 0.05},
        {"gradient_clip_val": 0.01, "gradient_clip_algorithm": "value"},
        {"accumulate_grad_batches": 3},
        {"scheduler": partial(torch.optim.lr_scheduler.CosineAnnealingLR, T_max=2)},
        {"scheduler": partial(torch.optim.lr_scheduler.StepLR, step_size=7, gamma=0.5), "scheduler_interval": "step"},
        {"scheduler": partial(torch.optim.lr_scheduler.ReduceLROnPlateau, patience=0, factor=0.5)},
    ],
    ids=["plain", "clip-norm", "clip-value", "accumulate", "cosine-per-epoch", "per-step", "plateau"],
)
def test_several_steps_per_call_train_exactly_as_one(settings, tmp_path):
    one = fit(1, tmp_path, **settings)
    assert_same_training(one, fit(8, tmp_path, **settings))
    if "accumulate_grad_batches" in settings:
        assert_same_training(one, fit(3, tmp_path, **settings))  # calls that straddle the accumulation windows


def test_global_step_counts_optimizer_steps_and_max_steps_stops_inside_a_call(tmp_path):
    trainer, _ = fit(8, tmp_path, max_epochs=1)
    assert trainer.global_step == 40  # one per batch, 5 calls
    trainer, _ = fit(8, tmp_path, max_epochs=1, accumulate_grad_batches=3)
    assert trainer.global_step == 14  # 13 full windows and the epoch's last batch
    stopped = fit(8, tmp_path, max_epochs=3, max_steps=13)
    assert stopped[0].global_step == 13
    assert_same_training(fit(1, tmp_path, max_epochs=3, max_steps=13), stopped)
    trainer, module = fit(8, tmp_path, max_epochs=1, limit=5)  # limit_train_batches counts batches, not calls
    assert trainer.global_step == 5 and module.train_count == 5 * 32


def test_validation_inside_an_epoch_sees_the_same_training(tmp_path):
    """val_check_interval=0.25: Lightning validates by call count, so those runs make one step per call."""
    seen = {}

    class Validations(pl.Callback):
        def on_validation_end(self, trainer, pl_module):
            seen.setdefault(pl_module.steps_per_call, []).append((trainer.global_step, float(trainer.callback_metrics["val/loss"])))

    for k in (1, 8):
        pl.seed_everything(0, verbose=False)
        dm = DigitsDataModule(patch_size=2, val_size=180, batch_size=32)
        net = PatchClassifier(partial(DotAttention, heads=1), image_size=8, channels=1, patch_size=2, num_classes=10)
        module = TaskModule(net, ImageClassification(), optimizer=partial(torch.optim.Adam, lr=1e-3), steps_per_call=k)
        pl.Trainer(max_epochs=1, val_check_interval=0.25, logger=False, callbacks=[Validations()], enable_checkpointing=False,
                   enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                   default_root_dir=tmp_path).fit(module, datamodule=dm)
    assert [step for step, _ in seen[8]] == [10, 20, 30, 40] and seen[8] == seen[1]


def test_schedules_step_at_their_interval(tmp_path):
    trainer, _ = fit(8, tmp_path, max_epochs=1, scheduler_interval="step",
                     scheduler=partial(torch.optim.lr_scheduler.StepLR, step_size=10, gamma=0.5))
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(3e-3 * 0.5**4)  # 40 steps
    trainer, _ = fit(8, tmp_path, max_epochs=3, scheduler=partial(torch.optim.lr_scheduler.StepLR, step_size=1, gamma=0.5))
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(3e-3 * 0.5**3)
    assert float(trainer.callback_metrics["train/lr"]) == pytest.approx(3e-3 * 0.5**2)  # the rate the last epoch trained with


@pytest.mark.parametrize("scheduler", [partial(torch.optim.lr_scheduler.CosineAnnealingLR, T_max=3), None], ids=["cosine", "none"])
def test_resuming_from_last_checkpoint_equals_an_uninterrupted_run(scheduler, tmp_path):
    whole = fit(8, tmp_path / "whole", max_epochs=3, scheduler=scheduler)
    first, _ = fit(8, tmp_path / "part", max_epochs=1, scheduler=scheduler)
    pl.seed_everything(1, verbose=False)  # the checkpoint's RNG state must win over this
    dm = NoisyDigits(patch_size=2, val_size=180, batch_size=32)
    net = PatchClassifier(partial(DotAttention, heads=2), image_size=8, channels=1, patch_size=2, num_classes=10,
                          dim=8, depth=2, prenorm=True, dropout=0.2)
    module = TaskModule(net, ImageClassification(), optimizer=partial(torch.optim.AdamW, lr=3e-3), scheduler=scheduler)
    trainer = pl.Trainer(max_epochs=3, logger=False, callbacks=[pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "resumed", save_last=True)],
                         enable_model_summary=False, deterministic=True, default_root_dir=tmp_path, num_sanity_val_steps=0)
    trainer.fit(module, datamodule=dm, ckpt_path=first.checkpoint_callback.last_model_path)
    assert_same_training(whole, (trainer, module))


def test_clipping_bounds_every_update(tmp_path):
    """With SGD (lr 1) and the gradient norm clipped to 1e-4, no weight moves more than steps x 1e-4."""
    before = None

    class Snapshot(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            nonlocal before
            before = torch.cat([p.detach().flatten().clone() for p in pl_module.parameters()])

    pl.seed_everything(0, verbose=False)
    dm = DigitsDataModule(patch_size=2, val_size=180, batch_size=32)
    net = PatchClassifier(partial(DotAttention, heads=1), image_size=8, channels=1, patch_size=2, num_classes=10)
    module = TaskModule(net, ImageClassification(), optimizer=partial(torch.optim.SGD, lr=1.0), gradient_clip_val=1e-4)
    trainer = pl.Trainer(max_epochs=1, logger=False, callbacks=[Snapshot()], enable_checkpointing=False,
                         enable_model_summary=False, enable_progress_bar=False, default_root_dir=tmp_path)
    trainer.fit(module, datamodule=dm)
    after = torch.cat([p.detach().flatten() for p in module.parameters()])
    moved = (after - before).norm()
    assert 0 < moved <= trainer.global_step * 1e-4 * (1 + 1e-4)


def test_progress_bar_counts_batches(tmp_path):
    pl.seed_everything(0, verbose=False)
    dm = DigitsDataModule(patch_size=2, val_size=180, batch_size=32)
    net = PatchClassifier(partial(DotAttention, heads=1), image_size=8, channels=1, patch_size=2, num_classes=10)
    module = TaskModule(net, ImageClassification(), optimizer=partial(torch.optim.Adam, lr=1e-3), steps_per_call=8)
    bar = pl.callbacks.TQDMProgressBar(refresh_rate=1)
    trainer = pl.Trainer(max_epochs=1, logger=False, callbacks=[bar], enable_checkpointing=False,
                         enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(module, datamodule=dm)
    assert bar.total_train_batches == 40 and bar.train_progress_bar.n == 40


def test_bad_settings_are_refused():
    net = PatchClassifier(partial(DotAttention, heads=1), image_size=8, channels=1, patch_size=2, num_classes=10)
    for bad in ({"steps_per_call": 0}, {"accumulate_grad_batches": 0}, {"gradient_clip_algorithm": "l1"},
                {"scheduler_interval": "batch"}, {"gradient_clip_val": -1.0}):
        with pytest.raises(Exception, match=f"module.{next(iter(bad))}="):
            TaskModule(net, ImageClassification(), optimizer=partial(torch.optim.Adam), **bad)
