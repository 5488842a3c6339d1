"""Encoder-decoder runs through the CLI: dates, sentence pairs and digit captions, learning, and attnexp-predict."""

from __future__ import annotations

import pytest
from helpers import read_events, read_metrics, run_dirs
from test_lm_runs import QUIET, run_predict

SMALL = ["trainer.max_epochs=1", "trainer.limit_train_batches=5", "net.dim=16", "data.batch_size=16", *QUIET]


def test_dates_run_logs_decoding_metrics_figures_and_predicts(cli):
    root, _ = cli(
        "data=dates",
        "data.train_size=400",
        "data.val_size=50",
        "data.test_size=50",
        "task.beam=2",
        *SMALL,
    )
    (run,) = run_dirs(root / "outputs")
    metrics = read_metrics(run)
    assert metrics["status"] == "ok" and metrics["net"] == "seq2seq" and metrics["task"] == "seq2seq"
    assert metrics["monitor"] == "val/exact"
    assert [name for name, _ in metrics["summary"]][:2] == ["test/exact", "test/cer"]
    for stage in ("val", "test"):
        assert 0 <= metrics[f"{stage}/exact"] <= metrics[f"{stage}/acc"] <= 1 and metrics[f"{stage}/cer"] >= 0
        assert metrics[f"{stage}/ppl"] == pytest.approx(2.718281828 ** metrics[f"{stage}/loss"], rel=1e-4)
    assert {
        "attn/layer0/entropy",
        "attn/layer3/entropy",
        "attn/layer5/max_weight",
    } <= metrics.keys()  # encoder, cross-attention
    events = read_events(run)
    assert "figures/cross_attention" in events.images and "val/exact" in events.scalars

    proc = run_predict(run, 'source="miércoles 3 de marzo de 2021"', "beam=3", "top_k=3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "source: 'miércoles 3 de marzo de 2021'" and lines[1].startswith("output: ")
    assert lines[2] == "top 3 (beam search, 3 hypotheses):" and lines[3].endswith(lines[1].removeprefix("output:"))
    probs = [float(line.split()[0]) for line in lines[3:6]]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
    proc = run_predict(run, "image=x.png")
    assert proc.returncode == 2 and "is a translation run: give source=" in proc.stderr, proc.stderr[-2000:]


def test_pairs_run_scores_bleu(cli, tmp_path):
    numbers = ["cero", "uno", "dos", "tres", "cuatro"], ["zero", "one", "two", "three", "four"]
    lines = [
        f"{numbers[0][i % 5]} {numbers[0][(i // 5) % 5]}\tit is {numbers[1][i % 5]} {numbers[1][(i // 5) % 5]} .\t#{i}"
        for i in range(60)
    ]
    path = tmp_path / "es-en.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    root, _ = cli("data=pairs", f"data.path={path}", *SMALL)
    (run,) = run_dirs(root / "outputs")
    metrics = read_metrics(run)
    assert metrics["status"] == "ok" and metrics["task"] == "translation" and metrics["monitor"] == "val/bleu"
    assert 0 <= metrics["test/bleu"] <= 1 and "test/cer" not in metrics
    proc = run_predict(run, 'source="dos tres"', "beam=1")
    assert proc.returncode == 0 and "(greedy)" in proc.stdout, proc.stderr[-2000:]


def test_bad_pairs_file_and_mlp_stop_before_training(cli, tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("uno\tone\ndos two\n", encoding="utf-8")
    _, proc = cli("data=pairs", f"data.path={path}", *SMALL, check=False)
    assert proc.returncode == 2 and "line 2, has no tab" in proc.stderr, proc.stderr[-2000:]
    _, proc = cli("data=dates", "model=mlp", *SMALL, check=False)
    assert proc.returncode == 2 and "mlp token mixer cannot predict next tokens" in proc.stderr, proc.stderr[-2000:]


# dot, seeded, 4 short epochs of 4,000 examples: the budget of the runs that must learn
LEARNT = [
    "model=dot",
    "data.train_size=4000",
    "data.val_size=300",
    "data.test_size=300",
    "trainer.max_epochs=4",
    "net.dim=32",
    "net.dropout=0.0",
    "seed=1",
    "threads=1",
    *QUIET,
]


def test_dates_are_learnt(cli):
    """dot, seeded, 4 short epochs: well above chance (exact match of a random date: 1 in 36,525)."""
    root, _ = cli(
        "data=dates",
        *LEARNT,
    )
    metrics = read_metrics(run_dirs(root / "outputs")[0])
    assert metrics["test/exact"] > 0.4, metrics  # 0.73 when written
    assert metrics["test/cer"] < 0.2, metrics


def test_digit_captions_are_learnt_and_predicted_from_an_image(cli, tmp_path):
    """dot on canvases of the bundled digits, seeded, 4 short epochs: well above chance (about 1 in 27 for
    guessing the digits of a canvas whose count shows)."""
    root, _ = cli(
        "data=captions",
        "data.images=digits",
        *LEARNT,
    )
    (run,) = run_dirs(root / "outputs")
    metrics = read_metrics(run)
    assert metrics["test/exact"] > 0.5, metrics  # 0.82 when written
    assert "figures/captions" in read_events(run).images

    from PIL import Image

    from attnexp.cli.predict import load_run
    from attnexp.data import CaptionsDataModule
    from attnexp.tasks import Seq2SeqTask

    dm = CaptionsDataModule(images="digits", train_size=4000, val_size=300, test_size=300)
    dm.setup()
    x, _ = dm.splits["test"]
    net, state = load_run(str(run))
    task = Seq2SeqTask()
    task.bind(dm)
    for i in range(3):  # the file, resized back onto the canvas, gets the caption the tensor gets
        raw = (x[i, 0] * state["image"]["std"] + state["image"]["mean"]).clamp(0, 1)
        path = tmp_path / f"canvas{i}.png"
        Image.fromarray((raw * 255).round().byte().numpy()).resize((96, 32), Image.Resampling.NEAREST).save(path)
        proc = run_predict(run, f"image={path}", "beam=1")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.splitlines()[1] == f"output: {task.texts(task.decode(net, x[i : i + 1]))[0]}", proc.stdout
