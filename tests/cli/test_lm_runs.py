"""Text runs through the CLI: toy corpus + attnexp-predict, a char-level file, a bad path."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess

import pytest
import torch
from helpers import read_events, read_metrics, run_dirs, run_script

from attnexp.cli.predict import find_checkpoint
from attnexp.errors import AttnexpError

QUIET = ["callbacks.progress_bar.refresh_rate=0"]


def run_predict(run, *overrides: str) -> subprocess.CompletedProcess:
    """``attnexp-predict`` on a run folder, from that folder."""
    return run_script(run, "attnexp-predict", f"run={run}", *overrides)


def test_corpus_run_logs_perplexity_and_figures_and_predicts(cli):
    root, _ = cli("model=dot", "data=corpus", "data.repeats=20", *QUIET)
    (run,) = run_dirs(root / "outputs")
    assert run.parent.name.startswith("dot_corpus_")  # <mixer>_<data>_<identity>/seed=<n>
    metrics = read_metrics(run)
    assert metrics["status"] == "ok" and metrics["net"] == "lm"
    assert metrics["val/ppl"] == pytest.approx(math.exp(metrics["val/loss"]), rel=1e-4)
    assert metrics["test/ppl"] == pytest.approx(math.exp(metrics["test/loss"]), rel=1e-4)
    assert metrics["task"] == "next_token"
    assert metrics["train/ppl"] == pytest.approx(math.exp(metrics["train/loss"]), rel=1e-4)
    events = read_events(run)
    scalars, images = events.scalars, events.images
    assert {"train/loss", "train/ppl", "val/loss", "val/acc", "val/ppl"} <= scalars.keys()
    assert {"figures/attention", "figures/next_token"} <= images
    # the corpus's val and test text are the same: the tested checkpoint is the epoch of the lowest val/loss
    assert metrics["test/loss"] == pytest.approx(min(scalars["val/loss"]), rel=1e-5)

    proc = run_predict(run, 'prompt="[bos] el perro"', "top_k=3", "tokens=4")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[1] == "next token (top 3):" and lines[2].endswith("'come'"), proc.stdout
    probs = [float(line.split()[0]) for line in lines[2:5]]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
    assert lines[-1].startswith("[bos] el perro come") and len(lines[-1].split()) == 7, proc.stdout
    assert (
        not list(run.glob("predict*")) and not (run / ".hydra" / "predict.yaml").exists()
    )  # predicting writes nothing

    proc = run_predict(run, 'prompt="zorro lobo"')
    assert proc.returncode == 2 and "has no token the model knows" in proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]

    job = shutil.copytree(run, root / "sweep" / "model=dot" / "seed=0")  # a sweep job's folder name holds '='
    proc = run_predict(job, 'prompt="[bos] el perro"', "tokens=1")
    assert proc.returncode == 0 and "'come'" in proc.stdout, proc.stderr[-2000:]


def test_predict_refuses_a_record_of_a_newer_schema_and_weights_its_network_does_not_take(cli):
    """A record of schema 99 was read as ours; a config that no longer fits the checkpoint gave torch's traceback."""
    root, _ = cli("data=corpus", "data.repeats=2", "trainer.max_epochs=1", *QUIET)
    (run,) = run_dirs(root / "outputs")
    record = read_metrics(run)
    (run / "metrics.json").write_text(json.dumps({**record, "schema": 99}))
    proc = run_predict(run, 'prompt="[bos] el perro"')
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "is a record of schema 99, not 2 (written by a newer attnexp)" in proc.stderr
    assert "upgrade attnexp" in proc.stderr and "next token" not in proc.stdout
    record["config"]["net"]["dim"] = 16
    (run / "metrics.json").write_text(json.dumps(record))
    proc = run_predict(run, 'prompt="[bos] el perro"')
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "checkpoint=best of run=" in proc.stderr and "was written by a different mixer or network" in proc.stderr
    assert "(shape checkpoint vs model: net.embed.weight (16, 64) vs (16, 16)" in proc.stderr
    assert "give a checkpoint this run wrote" in proc.stderr
    assert "size mismatch" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "given,told",
    [
        ("foo=1", "foo=1 sets foo, which is not a key of the composed config"),
        (f"+{'k' * 300}=1", "names a key of 300 characters"),
        ("top_k=abc", "top_k=abc is not allowed"),
        (f"top_k={'9' * 5000}", "value has 5000 digits"),
    ],
    ids=["unknown key", "key of 300 characters", "not a number", "5,000 digits"],
)
def test_predict_explains_a_command_line_it_cannot_read(tmp_path, given, told):
    """Hydra's own error (exit status 1) or a traceback answered these before."""
    proc = run_script(tmp_path, "attnexp-predict", f"run={tmp_path}", given)
    assert proc.returncode == 2 and told in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.startswith("attnexp-predict: ") and len(proc.stderr.strip().splitlines()) == 1
    assert max(map(len, proc.stderr.split())) < 250


def test_best_is_the_checkpoint_the_record_names_never_the_newest_file(tmp_path):
    """With save_top_k=3 the newest checkpoint is not the best: the record says which one the test loaded."""
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    names = ["interrupted.ckpt", "epoch006-acc0.8222.ckpt", "last.ckpt", "epoch004-acc0.8278.ckpt"]
    for age, name in enumerate(names):
        (folder / name).write_bytes(b"")
        os.utime(folder / name, (1e9 - age, 1e9 - age))  # the interrupted state is the newest file
    record = {"best_checkpoint": str(folder / "epoch004-acc0.8278.ckpt")}
    assert find_checkpoint(tmp_path, "best", record).name == "epoch004-acc0.8278.ckpt"
    assert find_checkpoint(tmp_path, "best", {}).name == "last.ckpt"  # a run that chose no best
    (folder / "last.ckpt").unlink()
    with pytest.raises(AttnexpError, match="interrupted before an epoch ended"):
        find_checkpoint(tmp_path, "last", record)
    assert find_checkpoint(tmp_path, str(folder / "interrupted.ckpt"), record).name == "interrupted.ckpt"


def test_char_level_run_on_a_small_file(cli, tmp_path):
    text = "".join(f"the {w} sat on the mat and {w} saw a cat.\n" for w in ("cat", "dog", "owl", "fox") * 30)
    (tmp_path / "book.txt").write_text(text, encoding="utf-8")
    root, _ = cli(
        "model=se",
        "data=text",
        "data.path=book.txt",
        "data.level=char",
        "data.context=32",
        "net.dim=32",
        "trainer.max_epochs=1",
        *QUIET,
    )
    (run,) = run_dirs(root / "outputs")
    metrics = read_metrics(run)
    assert metrics["status"] == "ok" and run.parent.name.startswith("se_text_")
    assert math.isfinite(metrics["val/ppl"]) and metrics["val/ppl"] < 24  # below guessing among the ~24 characters
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    state = ckpt["TextDataModule"]
    train_part = text[: int(len(text) * 0.8)]
    windows = metrics["train_samples_per_s"] * metrics["fit_s"]  # samples are sequences of 32 characters, not tokens
    assert len(train_part) / 32 * 0.9 < windows <= len(train_part) / 32
    assert state["level"] == "char" and state["context"] == 32
    assert state["vocab"][0] == "[unk]" and set(state["vocab"][1:]) == set(train_part)


def test_bad_text_path_stops_before_training(cli):
    root, proc = cli("data=text", "data.path=missing.txt", *QUIET, check=False)
    assert proc.returncode != 0
    assert "Cannot read data.path=missing.txt" in proc.stderr
    assert not list(root.rglob("*.ckpt"))
