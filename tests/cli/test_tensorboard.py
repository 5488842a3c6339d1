"""TensorBoard reads right at first sight: the HParams row with the curated columns and the task's summary metrics,
whole numbers shown as such, test metrics at the epoch of the checkpoint tested, epochs counted from 1 everywhere,
and an attention figure per layer with its inputs gridded and numbered by patch."""

from __future__ import annotations

from helpers import read_events, read_metrics, run_dirs

from attnexp.training.callbacks.tensorboard_hparams import CURATED

QUIET = "callbacks.progress_bar.refresh_rate=0"


def test_tensorboard_shows_a_run_as_the_readme_says(cli):
    # the checkpoint metric at its lowest: the best checkpoint is an early epoch while training runs on
    root, _ = cli("seed=2", "trainer.max_epochs=3", "net.depth=2", "callbacks.checkpoint.mode=min", QUIET)
    (run,) = run_dirs(root / "outputs")
    assert run.parent.name.startswith("dot_digits_") and run.name == "seed=2"
    events, record = read_events(run), read_metrics(run)

    assert set(CURATED) <= set(events.columns) and "trainer.max_epochs" in events.columns  # and what the command set
    assert events.session["seed"].string_value == "2" and events.session["depth"].string_value == "2"  # not 2.0000
    assert events.session["params"].number_value == record["params"]
    assert events.metric_columns == ["test/acc", "val/acc_best", "test/loss"]  # the summary metrics, headline first

    (best,) = (run / "checkpoints").glob("epoch*.ckpt")
    tested = int(best.name[5:8])  # epochs from 1 in checkpoint names
    assert record["tested_epoch"] == tested and tested < 3
    assert set(events.steps["test/acc"]) == {tested}  # at the tested checkpoint's epoch (the HParams row logs it again)
    assert events.steps["val/acc"] == events.steps["train/loss"] == events.steps["attn/layer1/entropy"] == [1, 2, 3]
    assert record["epochs"] == 3 and (run / "checkpoints" / "last.ckpt").exists()
    assert {"figures/attention/layer0", "figures/attention/layer1", "figures/predictions"} <= events.images
