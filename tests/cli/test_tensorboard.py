"""TensorBoard reads right at first sight (finding 9): HParams columns in the promised order with the task's
headline metric first among the metrics and telemetry after, whole numbers shown as such, single runs named by what
their command set, test metrics at the epoch of the checkpoint tested, epochs counted from 1 everywhere, and an
attention figure per layer with its inputs gridded and numbered by patch."""

from __future__ import annotations

from helpers import read_events, read_metrics, run_dirs

from attnexp.callbacks.tensorboard_hparams import CURATED

QUIET = "callbacks.progress_bar.refresh_rate=0"


def test_tensorboard_shows_a_run_as_the_readme_says(cli):
    # the checkpoint metric at its lowest: the best checkpoint is an early epoch while training runs on
    root, _ = cli("seed=2", "trainer.max_epochs=3", "net.depth=2", "callbacks.checkpoint.mode=min", QUIET)
    (run,) = run_dirs(root / "outputs")
    assert run.name.endswith(
        "_dot_digits_callbacks.checkpoint.mode=min,callbacks.progress_bar.refresh_rate=0,"
        "net.depth=2,seed=2,trainer.max_epochs=3"
    )
    events, record = read_events(run), read_metrics(run)

    assert events.columns[:5] == ["mixer", "seed", "data", "lr", "params"]  # shown first, in this order
    assert events.columns[: len(CURATED)] == list(CURATED) and "trainer.max_epochs" in events.columns
    assert events.session["seed"].string_value == "2" and events.session["depth"].string_value == "2"  # not 2.0000
    assert events.session["params"].number_value == record["params"]
    metrics = events.metric_columns
    assert metrics[:3] == ["test/acc", "val/acc_best", "test/loss"]  # the task's summary metrics, headline first
    telemetry = [i for i, m in enumerate(metrics) if m.startswith("attn/")]
    assert telemetry and min(telemetry) > max(metrics.index(m) for m in ("val/acc", "train/loss", "train/lr"))
    assert set(metrics) >= {k for k in events.scalars if "/" in k}  # every logged curve has its column

    (best,) = (run / "checkpoints").glob("epoch*.ckpt")
    tested = int(best.name[5:8])  # epochs from 1 in checkpoint names
    assert record["tested_epoch"] == tested and tested < 3
    assert events.steps["test/acc"] == [tested]  # at the tested checkpoint's epoch, not the last one
    assert events.steps["val/acc"] == events.steps["train/loss"] == events.steps["attn/layer1/entropy"] == [1, 2, 3]
    assert record["epochs"] == 3 and (run / "checkpoints" / "last.ckpt").exists()
    assert {"figures/attention/layer0", "figures/attention/layer1", "figures/predictions"} <= events.images
