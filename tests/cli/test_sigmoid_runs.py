"""model=sigmoid trains on every task family (patch classifier: tests/cli/test_cli_runs.py), its weights recorded as
what they are: no distributions."""

from __future__ import annotations

import pytest
from helpers import FAST, read_metrics, run_dirs

FAMILIES = {
    "vit": ["net=vit", "net.dim=16", "net.depth=1", "model.heads=2"],
    "language model": ["data=corpus", "data.context=16", "net.dim=16"],
    "encoder": ["data=listops", "net.dim=16", "data.train_size=256", "data.val_size=128", "data.test_size=128"],
    "seq2seq": ["data=dates", "net.dim=16", "data.train_size=512", "data.val_size=128", "data.test_size=128"],
    "answer tokens": [
        "data=mqar",
        "net.dim=16",
        "data.train_size=256",
        "data.val_size=128",
        "data.test_size=128",
        "model.heads=2",
    ],
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_sigmoid_trains(cli, family):
    root, _ = cli("model=sigmoid", *FAMILIES[family], *FAST)
    (run,) = run_dirs(root / "outputs")
    metrics = read_metrics(run)
    assert metrics["status"] == "ok" and metrics["mixer"] == "sigmoid" and metrics["path"] == "explicit"
    assert metrics["test/loss"] == metrics["test/loss"]  # a number, not NaN
    assert metrics["attn/layer0/mass"] > 0 and "attn/layer0/entropy" not in metrics
