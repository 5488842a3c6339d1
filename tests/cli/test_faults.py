"""Divergence and reruns lose nothing and say what happened (interrupts and kills: tests/process/test_kills.py)."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch
from helpers import read_metrics, run_cli, run_dirs
from torch import nn

from attnexp.data import DigitsDataModule
from attnexp.tasks import ImageClassification
from attnexp.training.divergence import DivergedError
from attnexp.training.module import TaskModule

FINAL = ("test/acc", "test/loss", "val/acc_best", "val/acc", "val/loss", "train/loss", "train/acc")


def test_same_seed_gives_identical_metrics(tmp_path):
    records = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        run_cli(tmp_path / name, "trainer.max_epochs=2", "seed=7", "callbacks.progress_bar.refresh_rate=0")
        records.append(read_metrics(run_dirs(tmp_path / name / "outputs")[0]))
    assert {k: records[0][k] for k in FINAL} == {k: records[1][k] for k in FINAL}


def test_huge_learning_rate_diverges_with_clear_message(cli):
    root, proc = cli(
        "module.optimizer._target_=torch.optim.SGD",
        "module.optimizer.lr=1e12",
        "callbacks.progress_bar.refresh_rate=0",
        check=False,
    )
    assert proc.returncode == 3
    (run,) = run_dirs(root / "outputs")
    record = read_metrics(run)
    assert record["status"] == "diverged"
    assert "NaN or infinite at step" in record["error"] and "module.optimizer.lr" in record["error"]
    assert "(epoch 1)" in record["error"] and "no checkpoint was written" in record["error"]  # epochs count from 1
    assert "Traceback" not in proc.stderr


class NaNAfter(nn.Module):
    """A classifier whose output turns NaN after ``bad_from`` forward passes in training."""

    def __init__(self, bad_from: int) -> None:
        super().__init__()
        self.linear, self.num_classes, self.bad_from, self.calls = nn.Linear(16 * 4, 10), 10, bad_from, 0

    def forward(self, x):
        self.calls += self.training
        out = self.linear(x.flatten(1))
        return out * float("nan") if self.training and self.calls > self.bad_from else out


def test_divergence_stops_at_once_and_keeps_last_good_checkpoint(tmp_path):
    torch.manual_seed(0)
    dm = DigitsDataModule(patch_size=2, val_size=180)  # 20 steps per epoch
    module = TaskModule(
        NaNAfter(bad_from=45),
        ImageClassification(),
        optimizer=lambda params: torch.optim.SGD(params, lr=0.1),
        divergence_check_every=5,
    )
    ckpt = pl.callbacks.ModelCheckpoint(dirpath=tmp_path, save_last=True, monitor="val/acc", mode="max")
    trainer = pl.Trainer(
        max_epochs=5,
        callbacks=[ckpt],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    with pytest.raises(DivergedError, match=r"at step 45 .*last\.ckpt still holds the last good epoch"):
        trainer.fit(module, datamodule=dm)
    assert trainer.global_step <= 50  # stopped within one check interval
    state = torch.load(tmp_path / "last.ckpt", weights_only=True)
    assert state["epoch"] == 1 and all(torch.isfinite(v).all() for v in state["state_dict"].values())
