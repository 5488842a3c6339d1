"""Every variant trains through the CLI and leaves a complete run folder."""

from __future__ import annotations

import pytest

from conftest import FAST, read_metrics, run_dirs

VARIANTS = ["dot", "euclid", "masked", "se", "mlp"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_variant_trains_on_digits(cli, variant):
    root, proc = cli(f"model={variant}", *FAST)
    (run,) = run_dirs(root / "outputs")
    assert run.name.endswith(f"_{variant}_digits")
    metrics = read_metrics(run)
    assert metrics["status"] == "ok"
    assert metrics["variant"] == variant and metrics["data"] == "digits"
    for key in ("test/acc", "val/acc_best", "train/loss", "params", "wall_s", "train_samples_per_s"):
        assert key in metrics, key
    assert 0.0 <= metrics["test/acc"] <= 1.0 and metrics["params"] > 0
    assert list(run.glob("events.out.tfevents.*"))
    assert (run / "checkpoints" / "last.ckpt").exists()
    assert len(list((run / "checkpoints").glob("epoch*.ckpt"))) == 1
    assert (run / ".hydra" / "config.yaml").exists() and (run / "train.log").exists()


def test_dot_learns_digits(cli):
    root, _ = cli("model=dot", "net.dim=32", "trainer.max_epochs=20", "seed=0", "callbacks.progress_bar.refresh_rate=0")
    (run,) = run_dirs(root / "outputs")
    metrics = read_metrics(run)
    assert metrics["test/acc"] >= 0.85, metrics
    assert metrics["val/acc_best"] >= metrics["val/acc"] - 1e-9


def read_events(run) -> tuple[dict[str, list[float]], set[str], set[str]]:
    """Scalars, image tags and the metric names of the hparams experiment, from all event files."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
    from tensorboard.util.tensor_util import make_ndarray

    scalars, images, hparam_metrics = {}, set(), set()
    for path in sorted(run.glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name
                if plugin == "hparams":
                    data = HParamsPluginData.FromString(value.metadata.plugin_data.content)
                    hparam_metrics |= {m.name.tag for m in data.experiment.metric_infos}
                elif plugin == "images" or value.HasField("image"):
                    images.add(value.tag)
                elif plugin == "scalars" or value.HasField("simple_value") or value.HasField("tensor"):
                    number = value.simple_value if value.HasField("simple_value") else float(make_ndarray(value.tensor))
                    scalars.setdefault(value.tag, []).append(number)
    return scalars, images, hparam_metrics


def test_logger_none_trains_and_records(cli):
    root, _ = cli("logger=none", "trainer.max_epochs=1", "trainer.limit_train_batches=3", "callbacks.progress_bar.refresh_rate=0")
    (run,) = run_dirs(root / "outputs")
    assert read_metrics(run)["status"] == "ok" and not list(run.rglob("events.out.tfevents.*"))


def test_step_level_loss_when_asked_for(cli):
    root, _ = cli("module.log_every_n_steps=2", "trainer.max_epochs=1", "trainer.limit_train_batches=6", "callbacks.progress_bar.refresh_rate=0")
    scalars, _, _ = read_events(run_dirs(root / "outputs")[0])
    assert len(scalars["train/loss_step"]) == 3 and len(scalars["train/loss"]) == 1  # steps 0, 2, 4 and the epoch


def test_tensorboard_has_epoch_scalars_hparams_and_figures(cli):
    root, _ = cli("model=euclid", "trainer.max_epochs=2", "callbacks.progress_bar.refresh_rate=0")
    (run,) = run_dirs(root / "outputs")
    scalars, images, hparam_metrics = read_events(run)
    assert len(scalars["train/loss"]) == 2 and len(scalars["val/acc"]) == 2, scalars.keys()
    assert "val/acc_best" in scalars and "test/acc" in scalars
    assert {"figures/attention", "figures/predictions"} <= images
    assert {"test/acc", "val/acc_best"} <= hparam_metrics
    metrics = read_metrics(run)
    assert scalars["test/acc"][-1] == pytest.approx(metrics["test/acc"])
    assert -1 not in scalars["test/acc"]
