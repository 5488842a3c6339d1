"""Every variant trains through the CLI and leaves a complete run folder."""

from __future__ import annotations

import pytest
import torch
from helpers import FAST, options, read_events, read_metrics, run_dirs

VARIANTS = options("model")  # every option in configs/model


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_trains_on_digits(cli, variant):
    root, _proc = cli(f"model={variant}", *FAST)
    (run,) = run_dirs(root / "outputs")
    assert run.parent.name.startswith(f"{variant}_digits_") and run.name == "seed=0"  # then the identity, the seed
    metrics = read_metrics(run)
    assert metrics["status"] == "ok"
    assert metrics["mixer"] == variant and metrics["data"] == "digits"
    paths = {"dot": "sdpa", "masked": "sdpa", "l2": "sdpa", "cosine": "sdpa", "euclid": "fused", "sigmoid": "explicit"}
    assert metrics.get("path") == paths.get(variant)
    for key in ("test/acc", "val/acc_best", "train/loss", "params", "wall_s", "train_samples_per_s"):
        assert key in metrics, key
    assert 0.0 <= metrics["test/acc"] <= 1.0 and metrics["params"] > 0
    assert list(run.glob("events.out.tfevents.*"))
    assert (run / "checkpoints" / "last.ckpt").exists()
    assert len(list((run / "checkpoints").glob("epoch*.ckpt"))) == 1
    assert (run / "train.log").exists() and not (run / ".hydra").exists()  # the record says everything


def test_the_explicit_path_is_recorded(cli):
    """model.path=explicit: the formula through autograd trains, and metrics.json says so."""
    root, _ = cli("model=euclid", "model.path=explicit", *FAST)
    (run,) = run_dirs(root / "outputs")
    assert read_metrics(run)["status"] == "ok" and read_metrics(run)["path"] == "explicit"


def test_the_record_holds_the_threads_training_ran_on_and_why(cli, monkeypatch):
    """The thread rule chooses when fitting starts: metrics.json says what it chose then (it said the one thread a run
    makes its data and weights on), and why."""
    from attnexp.training import threads

    monkeypatch.setattr(threads, "MOST", 2)
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", 1.0)  # every step pays for its threads
    monkeypatch.setattr(threads, "free_cores", lambda: 2, raising=False)  # quiet, whatever runs beside the test
    try:
        root, _ = cli(*FAST)
    finally:
        torch.set_num_threads(1)  # the test process's own count (tests/conftest.py)
    device = read_metrics(run_dirs(root / "outputs")[0])["device"]
    assert device["threads"] == 2, device
    assert device["threads_why"].endswith("at most 2 cores: 2 threads"), device


def test_dot_learns_digits(cli):
    root, _ = cli("model=dot", "net.dim=32", "trainer.max_epochs=20", "seed=0", "callbacks.progress_bar.refresh_rate=0")
    (run,) = run_dirs(root / "outputs")
    metrics = read_metrics(run)
    assert metrics["test/acc"] >= 0.85, metrics
    assert metrics["val/acc_best"] >= metrics["val/acc"] - 1e-9


def test_logger_none_trains_and_records(cli):
    root, _ = cli(
        "logger=none", "trainer.max_epochs=1", "trainer.limit_train_batches=3", "callbacks.progress_bar.refresh_rate=0"
    )
    (run,) = run_dirs(root / "outputs")
    assert read_metrics(run)["status"] == "ok" and not list(run.rglob("events.out.tfevents.*"))


def test_lightning_clipping_and_accumulation_are_trainer_settings(cli):
    root, _ = cli("trainer.gradient_clip_val=1.0", "trainer.accumulate_grad_batches=4", *FAST)
    (run,) = run_dirs(root / "outputs")
    record = read_metrics(run)
    assert record["status"] == "ok" and record["effective_batch_size"] == 4 * record["batch_size"]
    assert record["config"]["trainer"]["gradient_clip_val"] == 1.0


def test_step_level_loss_when_asked_for(cli):
    root, _ = cli(
        "trainer.log_every_n_steps=2",
        "trainer.max_epochs=1",
        "trainer.limit_train_batches=6",
        "callbacks.progress_bar.refresh_rate=0",
    )
    scalars = read_events(run_dirs(root / "outputs")[0]).scalars
    assert len(scalars["train/loss_step"]) == 3 and len(scalars["train/loss"]) == 1  # steps 0, 2, 4 and the epoch


def test_tensorboard_has_epoch_scalars_hparams_and_figures(cli):
    root, _ = cli("model=euclid", "trainer.max_epochs=2", "callbacks.progress_bar.refresh_rate=0")
    (run,) = run_dirs(root / "outputs")
    events = read_events(run)
    scalars, images, hparam_keys = events.scalars, events.images, events.hparams
    assert len(scalars["train/loss"]) == 2 and len(scalars["val/acc"]) == 2, scalars.keys()
    assert "val/acc_best" in scalars and "test/acc" in scalars
    assert {"figures/attention/layer0", "figures/predictions"} <= images
    assert {"mixer", "seed", "lr", "params"} <= hparam_keys
    metrics = read_metrics(run)
    assert scalars["test/acc"][-1] == pytest.approx(metrics["test/acc"])
    assert -1 not in scalars["test/acc"]


@pytest.mark.parametrize(
    "variant, precision", [("dot", "bf16-mixed"), ("euclid", "bf16-mixed"), ("euclid", "bf16-true")]
)
def test_bf16_training_run_is_finite(cli, variant, precision):
    """Training, the figures and the test all run at the trainer's precision (bf16-true: bf16 weights too)."""
    root, _ = cli(f"model={variant}", f"trainer.precision={precision}", *FAST)
    (run,) = run_dirs(root / "outputs")
    record = read_metrics(run)
    assert record["status"] == "ok"
    assert all(record[k] == record[k] and abs(record[k]) < 1e6 for k in ("train/loss", "val/loss", "test/loss"))
