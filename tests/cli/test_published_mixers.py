"""Published attention mechanisms written as their authors write them, from a folder of one's own
(examples/published_attention): each passes the conformance kit at two network sizes and trains end to end with
every callback; and what the kit and a run say about mixers that break the contract."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import FAST, PUBLISHED, REPO, TEST_ENV, read_events, read_metrics, run_cli, run_dirs

SIZES = {  # a network of another width, depth and number of heads than the small default (gau: one head)
    "diff": ["data=digits", "net.dim=16", "net.depth=2", "net.prenorm=true", "model.heads=2"],
    "linear": ["data=digits", "net.dim=16", "net.depth=2", "net.prenorm=true", "model.heads=2"],
    "gau": ["data=digits", "net.dim=16", "net.depth=2", "net.prenorm=true"],
}
KINDS = {"diff": "attn/layer0/negative_mass", "linear": "attn/layer0/entropy", "gau": "attn/layer0/mass"}


def kit(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **TEST_ENV, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "attnexp.cli.check", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture
def folder(tmp_path) -> Path:
    """The example folder copied where a user would keep it, with the tests' broken mixers beside it."""
    shutil.copytree(PUBLISHED, tmp_path / "mine")
    shutil.copy(REPO / "tests" / "broken_mixers.py", tmp_path / "mine" / "broken_mixers.py")
    for name in ("Transposes", "FailsInTraining", "DropsALastToken", "NoWeights"):
        (tmp_path / "mine" / "configs" / "model" / f"{name.lower()}.yaml").write_text(
            f"_target_: broken_mixers.{name}\n_partial_: true\n"
        )
    return tmp_path / "mine"


@pytest.mark.parametrize("name", list(SIZES))
def test_each_published_mixer_passes_the_kit_at_two_network_sizes(folder, name):
    small = kit(folder, f"model={name}", "--no-speed")
    assert small.returncode == 0 and "14 checks: all passed" in small.stdout, small.stdout + small.stderr[-2000:]
    assert "speed at" not in small.stdout and "the kit's small default" in small.stdout
    sized = kit(folder, f"model={name}", *SIZES[name])
    assert sized.returncode == 0 and "14 checks: all passed" in sized.stdout, sized.stdout + sized.stderr[-2000:]
    heads = "2 heads" if name != "gau" else "1 head"
    assert f"width 16, {heads}, batch 3, 16 tokens (19 keys for cross-attention)" in sized.stdout, sized.stdout
    assert "the network of data=digits, net=patch" in sized.stdout and "PASS  smoke run" in sized.stdout
    speed = sized.stdout.splitlines()[-1]
    assert speed.startswith("speed at batch 64, 16 tokens, width 16") and "x dot's time" in speed and "CPU " in speed, (
        speed
    )


def test_each_published_mixer_trains_beside_dot_with_every_callback(folder):
    run_cli(
        folder, "--multirun", "model=dot,diff,linear,gau", "data=digits", "net.dim=16", *FAST, "hydra/launcher=basic"
    )
    runs = {read_metrics(r)["mixer"]: r for r in run_dirs(folder / "outputs")}
    assert sorted(runs) == ["diff", "dot", "gau", "linear"]
    for run in runs.values():
        metrics = read_metrics(run)
        assert metrics["status"] == "ok" and (run / "checkpoints" / "last.ckpt").exists(), metrics
        assert {"figures/attention/layer0", "figures/predictions"} <= read_events(run).images
    for name, key in KINDS.items():
        assert key in read_metrics(runs[name]), (name, read_metrics(runs[name]))
    assert "attn/layer0/entropy" not in read_metrics(runs["diff"]) and "attn/layer0/score_max" in read_metrics(
        runs["gau"]
    )


def test_the_kit_catches_an_output_in_another_layout_at_the_composed_size(folder):
    """(B, C, L) returned where C = L: 16 tokens of width 16 on the digits; a run would train on it and exit 0."""
    proc = kit(folder, "model=transposes", "data=digits", "net.dim=16")
    assert proc.returncode == 1 and "FAIL  token layout" in proc.stdout and "FAIL  shapes" in proc.stdout, proc.stdout
    assert "width 16, 1 head, batch 3, 16 tokens" in proc.stdout and "speed at" not in proc.stdout


def test_the_kits_smoke_run_finds_what_only_training_shows(folder):
    proc = kit(folder, "model=failsintraining")
    lines = {line[6:31].strip(): line for line in proc.stdout.splitlines() if line[:4] in ("PASS", "FAIL", "n/a ")}
    assert proc.returncode == 1 and lines["smoke run"].startswith("FAIL"), proc.stdout + proc.stderr[-2000:]
    assert all(not line.startswith("FAIL") for name, line in lines.items() if name != "smoke run")
    assert (
        "the mixer FailsInTraining raised RuntimeError: this mixer cannot train (at broken_mixers.py:"
        in lines["smoke run"]
    )
    assert "14 checks: 1 failed (smoke run)" in proc.stdout


def test_a_mixer_without_weights_runs_without_attention_telemetry_and_says_so(folder):
    proc = run_cli(folder, "model=noweights", *FAST)
    (run,) = run_dirs(folder / "outputs")
    assert read_metrics(run)["status"] == "ok" and not [k for k in read_metrics(run) if k.startswith("attn/")]
    said = [line for line in proc.stderr.splitlines() if "returns no attention weights" in line]
    assert said == [
        "NoWeights returns no attention weights (forward(..., need_weights=True) gave None): no attention "
        "telemetry and no attention figures for this run."
    ], proc.stderr[-3000:]


@pytest.mark.parametrize(
    "name,words",
    [
        (
            "failsintraining",
            "Run failed: the mixer FailsInTraining raised RuntimeError: this mixer cannot train (at broken_mixers.py:",
        ),
        ("dropsalasttoken", "Run failed: DropsALastToken.forward (broken_mixers.py:"),
    ],
)
def test_a_failure_inside_a_mixer_names_it_and_its_line_with_the_traceback_in_train_log(folder, name, words):
    proc = run_cli(folder, f"model={name}", *FAST, check=False)
    (run,) = run_dirs(folder / "outputs")
    message = " ".join(proc.stderr.split())
    assert proc.returncode == 1 and words in message and read_metrics(run)["status"] == "failed", message[-3000:]
    assert f"The traceback is in {run.relative_to(folder)}/train.log." in message
    log = (run / "train.log").read_text()
    assert "Traceback (most recent call last)" in log and "broken_mixers.py" in log
    if name == "dropsalasttoken":
        assert re.search(r"returned an output of shape \((\d+), 15, 4\) for tokens of shape \(\1, 16, 4\)", message), (
            message
        )
