"""Mechanisms from recent papers in a user's folder (tests/paper_mixers.py), as a new user tries them: a leak that
training finds makes a run invalid and the kit fails it at its line; a bug the smoke run finds, and a NaN a mixer
makes, are named at the line that computed them; what the mixers' weights are is recorded."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
import yaml
from helpers import REPO, line_of, read_metrics, run_cli, run_dirs
from helpers import run_kit as kit
from paper_mixers import DecayOverflows, KeyConvAttention, SelectionNaN

from attnexp.cli.compare import main as compare

MIXERS = ("KeyConvAttention", "KeyConvLeaks", "Retention", "DecayOverflows", "SelectionNaN")
CORPUS = ["data=corpus", "trainer.max_epochs=1", "callbacks.progress_bar.refresh_rate=0"]
TRAINED = "trainer.limit_train_batches=20"  # enough steps to move a kernel off the identity, as any training does


@pytest.fixture
def folder(tmp_path) -> Path:
    """A user's folder: the mechanisms' module and a config for each."""
    (tmp_path / "configs" / "model").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "paper_mixers.py", tmp_path / "paper_mixers.py")
    for name in MIXERS:
        (tmp_path / "configs" / "model" / f"{name.lower()}.yaml").write_text(
            f"_target_: paper_mixers.{name}\n_partial_: true\n"
        )
    return tmp_path


def at(cls: type, text: str) -> str:
    """``paper_mixers.py:<line>`` of ``text`` in ``cls``: the line as a run in the user's folder names it."""
    return f"paper_mixers.py:{line_of(cls, text).rsplit(':', 1)[1]}"


def line(out: str, check: str) -> str:
    return next(x for x in out.splitlines() if x[6:31].strip() == check)


def test_the_kit_fails_the_leaky_key_convolution_at_its_line_and_passes_the_correct_one(folder):
    leaky = kit(folder, "model=keyconvleaks", "data=corpus", "--no-speed")
    leak = line(leaky.stdout, "no causal leak")
    assert leaky.returncode == 1 and leak.startswith("FAIL"), leaky.stdout + leaky.stderr[-2000:]
    assert "it leaks once its parameters move from their initial values" in leak
    assert f"first in KeyConvLeaks, at {at(KeyConvAttention, 'F.conv2d(')} in attend" in leak, leak
    right = kit(folder, "model=keyconvattention", "data=corpus", "--no-speed")
    assert right.returncode == 0 and "14 checks: all passed" in right.stdout, right.stdout + right.stderr[-2000:]
    smoke = line(right.stdout, "smoke run")
    assert "at the trained parameters of its 2 mixers: no causal leak, key padding invisible" in smoke, smoke


def test_a_run_that_learns_to_read_the_next_token_is_invalid_and_no_comparison_counts_it(folder):
    proc = run_cli(folder, "model=keyconvleaks", *CORPUS, TRAINED, check=False)
    (leaky,) = run_dirs(folder / "outputs")
    record = read_metrics(leaky)
    message = " ".join(proc.stderr.split())
    assert proc.returncode == 1 and record["status"] == "invalid", message[-3000:]
    assert record["causality"]["leak"] and record["causality"]["largest_change"] > record["causality"]["tolerance"]
    assert "Run invalid: the trained network reads later tokens" in message and "layer 0, KeyConvLeaks (" in message
    sweep = run_cli(
        folder, "--multirun", "model=dot,keyconvattention,retention", *CORPUS, TRAINED, "hydra/launcher=basic"
    )
    runs = {read_metrics(r)["mixer"]: read_metrics(r) for r in run_dirs(folder / "outputs")}
    assert {m: r["status"] for m, r in runs.items()} == {
        "keyconvleaks": "invalid",
        "dot": "ok",
        "keyconvattention": "ok",
        "retention": "ok",
    }, sweep.stderr[-3000:]
    assert runs["keyconvattention"]["causality"] == {
        "weights": "the weights tested",
        "tolerance": 1e-4,
        "largest_change": 0.0,
        "leak": False,
    }
    out = folder / "cmp"
    assert compare([str(folder / "outputs" / "runs"), "--out", str(out)]) == 0
    configs = {r["config"] for r in csv.DictReader((out / "summary.csv").open())}
    assert configs == {"model=dot", "model=keyconvattention", "model=retention"}
    assert f"Left out: {leaky} (invalid: the trained network reads later tokens" in (out / "summary.md").read_text()


def test_what_the_mixers_weights_are_is_recorded_in_the_record_hparams_and_summary(folder):
    run_cli(
        folder, "--multirun", "model=dot,retention", *CORPUS, "trainer.limit_train_batches=3", "hydra/launcher=basic"
    )
    runs = {read_metrics(r)["mixer"]: r for r in run_dirs(folder / "outputs" / "runs")}
    for mixer, kind in (("dot", "distributions"), ("retention", "signed")):
        assert read_metrics(runs[mixer])["weight_kind"] == kind
        assert yaml.safe_load((runs[mixer] / "hparams.yaml").read_text())["weight_kind"] == kind
    (summary,) = (folder / "outputs" / "multirun").rglob("summary.md")
    rows = summary.read_text().split("### Runs")[1].splitlines()
    assert "| signed |" in next(r for r in rows if r.startswith("| model=retention |"))


def test_a_weights_bug_only_the_smoke_run_meets_is_named_at_the_line_that_computed_them(folder):
    """Finding: the kit named the class line (buggy_retention.py:48), not the line that computed the weights."""
    made = f"(first made at {at(DecayOverflows, 'decay = self.gamma**distance')}, in normalise)"
    proc = kit(folder, "model=decayoverflows", "--no-speed")
    smoke = line(proc.stdout, "smoke run")
    assert proc.returncode == 1 and "14 checks: 1 failed (smoke run)" in proc.stdout, proc.stdout + proc.stderr
    assert "DecayOverflows (" in smoke and made in smoke and "made NaN or infinite weights" in smoke, smoke
    run = run_cli(folder, "model=decayoverflows", "trainer.max_epochs=1", "trainer.limit_train_batches=2", check=False)
    assert run.returncode == 1 and made in " ".join(run.stderr.split()), run.stderr[-3000:]


def test_a_nan_a_mixer_makes_fails_the_run_at_its_line_not_as_a_divergence(folder):
    """Finding: a NaN from a mixer exited 3 with advice on learning rate and precision, naming neither the mixer nor
    its file."""
    proc = run_cli(folder, "model=selectionnan", *CORPUS, "trainer.limit_train_batches=3", check=False)
    (run,) = run_dirs(folder / "outputs")
    message = " ".join(proc.stderr.split())
    assert proc.returncode == 1 and read_metrics(run)["status"] == "failed", message[-3000:]
    made = at(SelectionNaN, "return -chosen / chosen.amax")
    assert "Run failed: the mixer SelectionNaN made a NaN or infinity from finite inputs" in message, message
    assert f"first at {made}, in penalty" in message and "the NaN came from the mixer's own arithmetic" in message
