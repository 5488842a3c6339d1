"""A single run's console says what matters: its folder first, a line per epoch, the test result rounded, where its
files are; Lightning's INFO lines, the model summary and library deprecations are in train.log only (finding 8)."""

from __future__ import annotations

import re

from helpers import read_metrics, run_dirs


def test_a_single_run_prints_what_matters_and_leaves_the_chatter_to_train_log(cli):
    root, proc = cli("trainer.max_epochs=2", "seed=1")  # with the progress bar (on stdout here: not a terminal)
    (run,) = run_dirs(root / "outputs")
    record, lines = read_metrics(run), proc.stderr.strip().splitlines()
    folder = run.relative_to(root).as_posix()
    assert lines[0] == f"Run folder: {folder}" and re.fullmatch(r"outputs/runs/dot_digits_[0-9a-f]{8}/seed=1", folder)
    assert (
        lines[1]
        == f"Training dot on digits: PatchClassifier, {record['params']:,} parameters; 2 epochs, batches of 64."
    )
    epochs = [line for line in lines if line.startswith("epoch ")]
    assert [e.split(":")[0] for e in epochs] == ["epoch 1/2", "epoch 2/2"]
    assert all(
        re.fullmatch(r"epoch \d/2: train/loss \d\.\d{4}, val/acc \d\.\d{4} \(best \d\.\d{4}\)", e) for e in epochs
    ), epochs
    (best,) = (run / "checkpoints").glob("epoch*.ckpt")
    tested = int(best.name[5:8])
    assert record["tested_epoch"] == tested
    assert lines[-2] == (
        f"Test (checkpoint of epoch {tested}, val/acc {record['monitor_best']:.4f}): "
        f"test/acc {record['test/acc']:.4f}, test/loss {record['test/loss']:.4f}"
    )
    assert re.fullmatch(
        rf"Run ok in [\d.]+ s: {re.escape(folder)}/ holds metrics.json, checkpoints/ and train.log; "
        rf"curves: tensorboard --logdir {re.escape(folder)}",
        lines[-1],
    ), lines[-1]
    output = proc.stdout + proc.stderr
    for chatter in ("GPU available", "limit_train_batches", "LeafSpec", "FLOPs", "Restoring states", "┏", "Tip:"):
        assert chatter not in output, chatter
    assert not re.search(r"\d\.\d{7,}", output)  # no 16-digit values
    assert "Epoch 1/2" in proc.stdout and "train/loss=" in proc.stdout and "val/acc=" in proc.stdout  # the bar
    log = (run / "train.log").read_text()
    assert "GPU available" in log and re.search(rf"{record['params']}\s+Trainable params", log)  # Lightning's summary
    assert "epoch 2/2: train/loss" in log and "Run folder:" in log
