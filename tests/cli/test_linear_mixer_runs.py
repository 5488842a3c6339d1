"""Sub-quadratic mixers in a user's folder (tests/linear_mixers.py), through the kit and through runs: every run
certifies its trained mixers on its own data (batch independence in both modes, no later token, finite outputs), so
a mixer that mixes the batch in training is `invalid` and left out of every comparison; a NaN a mixer makes at any
training step is named at its line; the correct families pass and train."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import REPO, line_of, read_metrics, run_cli, run_dirs
from helpers import run_kit as kit
from linear_mixers import BatchCentred, ChunkedSSD, NaNAtThirdStep

from attnexp.cli.compare import main as compare

MIXERS = ("Based", "Hedgehog", "ChunkedSSD", "GatedDeltaNet", "BatchCentred", "ChunkedSSDReadsAhead", "NaNAtThirdStep")
SHORT = ["trainer.max_epochs=1", "trainer.limit_train_batches=4", "callbacks.progress_bar.refresh_rate=0"]
MQAR = ["data=mqar", "data.train_size=256", "data.val_size=64", "data.test_size=64", "data.batch_size=32"]


@pytest.fixture
def folder(tmp_path) -> Path:
    (tmp_path / "configs" / "model").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "linear_mixers.py", tmp_path / "linear_mixers.py")
    for name in MIXERS:
        (tmp_path / "configs" / "model" / f"{name.lower()}.yaml").write_text(
            f"_target_: linear_mixers.{name}\n_partial_: true\n"
        )
    return tmp_path


def at(cls: type, text: str) -> str:
    return f"linear_mixers.py:{line_of(cls, text).rsplit(':', 1)[1]}"


def line(out: str, check: str) -> str:
    return next(x for x in out.splitlines() if x[6:31].strip() == check)


def test_a_mixer_that_mixes_the_batch_in_training_fails_the_kit_and_its_run_is_invalid_and_left_out(folder):
    """Finding: batch independence was checked in eval mode only; a 5-seed sweep then called the mixer worse than
    dot (p 0.012), with no warning."""
    checked = kit(folder, "model=batchcentred", "--no-speed")
    batch = line(checked.stdout, "batch independence")
    assert checked.returncode == 1 and batch.startswith("FAIL"), checked.stdout + checked.stderr[-2000:]
    assert at(BatchCentred, "z - z.mean(0") in batch, batch
    sweep = run_cli(folder, "--multirun", "model=dot,batchcentred", *SHORT, "hydra/launcher=basic", check=False)
    runs = {read_metrics(r)["mixer"]: (r, read_metrics(r)) for r in run_dirs(folder / "outputs" / "runs")}
    assert {m: r["status"] for m, (_, r) in runs.items()} == {"dot": "ok", "batchcentred": "invalid"}, sweep.stderr
    record = runs["batchcentred"][1]
    assert "batch independence" in record["error"] and at(BatchCentred, "z - z.mean(0") in record["error"], record
    assert runs["dot"][1]["certification"]["passed"], runs["dot"][1]["certification"]
    out = folder / "cmp"
    assert compare([str(folder / "outputs" / "runs"), "--out", str(out)]) == 0
    assert f"Left out: {runs['batchcentred'][0]} (invalid: " in (out / "summary.md").read_text()


def test_a_nan_a_mixer_first_makes_at_its_third_training_step_is_named_at_its_line(folder):
    """Finding: a NaN a mixer made at the third step was called a divergence, with advice on the learning rate and
    no mixer named."""
    proc = run_cli(folder, "model=nanatthirdstep", *SHORT, "module.divergence_check_every=20", check=False)
    (run,) = run_dirs(folder / "outputs")
    message = " ".join(proc.stderr.split())
    assert proc.returncode == 1 and read_metrics(run)["status"] == "failed", message[-3000:]
    assert "the mixer NaNAtThirdStep made a NaN or infinity from finite inputs" in message, message[-3000:]
    assert f"first at {at(NaNAtThirdStep, 'torch.sqrt(2.5')}, in score" in message, message[-3000:]
    assert "at step 2" in message and "attnexp-check model=nanatthirdstep" in message, message[-3000:]


def test_the_chunk_boundary_leak_fails_the_kit_at_a_language_models_default_size_and_its_run_is_invalid(folder):
    """Finding: data=corpus checked 8 tokens, inside one 16-token chunk, and the kit passed the leak."""
    checked = kit(folder, "model=chunkedssdreadsahead", "data=corpus", "--no-speed")
    leak = line(checked.stdout, "no causal leak")
    assert checked.returncode == 1 and leak.startswith("FAIL"), checked.stdout + checked.stderr[-2000:]
    assert at(ChunkedSSD, "F.pad(") not in leak and "the line cannot be told" in leak, leak
    proc = run_cli(folder, "model=chunkedssdreadsahead", *MQAR, *SHORT, check=False)
    (run,) = run_dirs(folder / "outputs")
    assert proc.returncode == 1 and read_metrics(run)["status"] == "invalid", proc.stderr[-3000:]


@pytest.mark.parametrize("name", ["based", "hedgehog", "chunkedssd", "gateddeltanet"])
def test_the_correct_families_pass_the_kit_at_data_corpus_and_train(folder, name):
    checked = kit(folder, f"model={name}", "data=corpus", "--no-speed")
    assert checked.returncode == 0 and "all passed" in checked.stdout, checked.stdout + checked.stderr[-2000:]
    run_cli(folder, f"model={name}", "data=corpus", *SHORT)
    (run,) = run_dirs(folder / "outputs")
    record = read_metrics(run)
    assert record["status"] == "ok" and record["certification"]["passed"], record.get("certification")


def test_a_run_whose_mixer_sees_the_padded_keys_of_its_own_data_is_invalid(tmp_path):
    """The data pads its sources: a mixer that drops the padding mask (and returns no weights, so no telemetry sees
    them) trained with padded keys in every row; its run is certified on its own padded batch."""
    (tmp_path / "configs" / "model").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "broken_mixers.py", tmp_path / "broken_mixers.py")
    (tmp_path / "configs" / "model" / "nopadding.yaml").write_text(
        "_target_: broken_mixers.IgnoresPaddingNoWeights\n_partial_: true\n"
    )
    dates = ["data=dates", "data.train_size=400", "data.val_size=50", "data.test_size=50", "net.dim=16"]
    proc = run_cli(tmp_path, "model=nopadding", *dates, *SHORT, "data.batch_size=16", check=False)
    (run,) = run_dirs(tmp_path / "outputs")
    record = read_metrics(run)
    assert proc.returncode == 1 and record["status"] == "invalid", proc.stderr[-3000:]
    assert "key padding invisible: largest change of a visible output when the" in record["error"], record["error"]
