"""A mixer of one's own, end to end from a folder outside the repository (the example folder's own commands are the
user's tier's: tests/user): the kit on a leaky mixer beside it; a mixer that does not subclass attnexp's classes, with
telemetry and HParams like a built-in; an installed package's mixer; predictions from another folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from helpers import FAST, REPO, read_metrics, run_cli, run_dirs, run_script

EXAMPLES = REPO / "examples"


def example_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "my_project"
    shutil.copytree(EXAMPLES / "relu_attention", folder)
    return folder


def test_the_kit_names_the_check_a_leaky_mixer_fails(tmp_path):
    """In the example's folder (its own mixer passes the kit: the user's tier runs examples/relu_attention/README.md),
    a mixer that reads later tokens fails on the causal leak, at its constructor's parameters and at trained ones."""
    folder = example_folder(tmp_path)
    shutil.copy(REPO / "tests" / "broken_mixers.py", folder / "broken_mixers.py")
    (folder / "configs" / "model" / "leaky.yaml").write_text(
        "_target_: broken_mixers.LeaksTheFuture\n_partial_: true\n"
    )
    leaky = run_script(folder, "attnexp-check", "model=leaky")
    assert leaky.returncode == 1, leaky.stdout + leaky.stderr[-2000:]
    assert "FAIL  no causal leak" in leaky.stdout, leaky.stdout
    assert "2 failed (no causal leak, smoke run)" in leaky.stdout, leaky.stdout  # the trained parameters leak too


def test_a_mixer_that_only_follows_the_call_contract_gets_telemetry_and_hparams(tmp_path):
    """A class written from scratch (no attnexp base class) is found in the network like a built-in one."""
    folder = tmp_path / "naive"
    (folder / "configs" / "model").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "broken_mixers.py", folder / "broken_mixers.py")
    (folder / "configs" / "model" / "naive.yaml").write_text("_target_: broken_mixers.NaiveSoftmax\n_partial_: true\n")
    run_cli(folder, "model=naive", *FAST)
    (run,) = run_dirs(folder / "outputs")
    metrics = read_metrics(run)
    assert run.parent.name.startswith("naive_digits_") and metrics["mixer"] == "naive"
    assert 0 < metrics["attn/layer0/entropy"] <= 1 and "attn/layer0/max_weight" in metrics
    hparams = yaml.safe_load((run / "hparams.yaml").read_text())
    assert tuple(int(hparams[k]) for k in ("width", "depth", "heads")) == (
        4,
        1,
        1,
    )  # one layer over the digits' 2x2 patches


def test_an_installed_packages_mixer_runs_from_any_folder(tmp_path):
    """pip's --target folder on the path (the kit on it: the user's tier runs examples/mixer_package/README.md)."""
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(EXAMPLES / "mixer_package"),
        ],
        check=True,
        capture_output=True,
        timeout=300,
        cwd=tmp_path,
    )
    shutil.rmtree(EXAMPLES / "mixer_package" / "build", ignore_errors=True)  # what the build leaves in the source tree
    for info in (EXAMPLES / "mixer_package").glob("*.egg-info"):
        shutil.rmtree(info)
    anywhere = tmp_path / "anywhere"
    anywhere.mkdir()
    installed = {"PYTHONPATH": str(site)}  # pip's --target folder: the package's own place on the import path
    run_cli(anywhere, "model=l1", *FAST, env=installed)
    (run,) = run_dirs(anywhere / "outputs")
    assert read_metrics(run)["mixer"] == "l1" and read_metrics(run)["status"] == "ok"


def test_predictions_of_a_run_with_ones_own_mixer_from_another_folder(tmp_path):
    folder = example_folder(tmp_path)
    run_cli(folder, "model=relu", "model.causal=true", "data=corpus", "data.context=16", "net.dim=16", *FAST)
    (run,) = run_dirs(folder / "outputs")
    proc = run_script(tmp_path, "attnexp-predict", f"run={run}", "prompt=el", "tokens=3")
    assert proc.returncode == 0 and "next token" in proc.stdout, proc.stdout + proc.stderr[-2000:]
