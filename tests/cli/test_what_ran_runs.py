"""Sweeps that differ only in a mixer's source, only in a config file's value, only in a default spelled out (and
options that cannot change the method): each run records what ran, and attnexp-compare groups them by it. A budget
still improving is flagged; resume=true finds a run by its settings."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest
from helpers import read_metrics, run_cli, run_dirs, run_script

MIXER = '''from torch import Tensor

from attnexp.mixers import MultiHeadAttention


class ScaledAttention(MultiHeadAttention):
    """softmax(scale * q.k / sqrt(d)) v."""

    def __init__(self, *args, scale: float = 1.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.scale = scale

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ k.transpose(-2, -1)) * self.head_dim**-0.5 * self.scale
'''
CONFIG = "_target_: scaled.ScaledAttention\n_partial_: true\nheads: 1\nscale: {scale}\n"
BUDGET = ["trainer.max_epochs=2", "trainer.limit_train_batches=3", "callbacks.progress_bar.refresh_rate=0"]
SWEEP = [*BUDGET, "hydra/launcher=basic"]  # the jobs one after the other: what they record is the subject here


def compare(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return run_script(cwd, "attnexp-compare", *args)


def configs(summary_csv: Path) -> dict[str, int]:
    return {r["config"]: int(r["n"]) for r in csv.DictReader(summary_csv.open()) if r["table"] == "all"}


# under pytest -n: the module's tests on one worker, which builds its runs once
pytestmark = pytest.mark.xdist_group("what_ran")


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """Four sweeps in a folder of one's own: dot and a mixer of one's own; that mixer with its source edited; with
    its config file's value changed; dot with the default rate spelled out, one thread and another output root."""
    root = tmp_path_factory.mktemp("what_ran")
    (root / "configs" / "model").mkdir(parents=True)
    (root / "scaled.py").write_text(MIXER)
    (root / "configs" / "model" / "scaled.yaml").write_text(CONFIG.format(scale=1.0))
    run_cli(root, "--multirun", "model=dot,scaled", "seed=0,1", *SWEEP, "hydra.sweep.dir=sweeps/first")
    (root / "scaled.py").write_text(MIXER + "\n# the score, tried again\n")
    run_cli(root, "--multirun", "model=scaled", "seed=0,1", *SWEEP, "hydra.sweep.dir=sweeps/source")
    (root / "scaled.py").write_text(MIXER)
    (root / "configs" / "model" / "scaled.yaml").write_text(CONFIG.format(scale=0.5))
    run_cli(root, "--multirun", "model=scaled", "seed=0,1", *SWEEP, "hydra.sweep.dir=sweeps/value")
    run_cli(
        root,
        "--multirun",
        "model=dot",
        "module.optimizer.lr=0.003",
        "threads=1",
        "paths.log_dir=elsewhere",
        "seed=2,3",
        *SWEEP,
        "hydra.sweep.dir=sweeps/spelled",
    )
    return root


def test_each_run_records_its_identity_code_data_settings_software_and_budget(sweeps):
    record = read_metrics(sweeps / "sweeps" / "first" / "model=scaled" / "seed=0")  # the sweep links its jobs' runs
    assert record["schema"] == 2 and record["config"]["model"] == {
        "_target_": "scaled.ScaledAttention",
        "_partial_": True,
        "heads": 1,
        "scale": 1.0,
    }
    assert record["choices"]["model"] == "scaled" and len(record["identity"]) == 12 and "seed" in record["leaves_out"]
    assert "scaled.py" in record["code"]["files"] and "attnexp/cli/train.py" in record["code"]["files"]
    assert record["dataset"]["files"] == {}  # the bundled digits: no file read, the settings say which data
    assert record["command"][0] == "attnexp" and "model=scaled" in record["command"] and record["started"]
    assert {"attnexp", "commit", "torch", "lightning", "python"} <= set(record["software"])
    assert record["device"]["type"] == "cpu" and [s for _, s in record["history"]] == ["running", "trained", "ok"]
    assert [epoch for epoch, _ in record["monitor_history"]] == [1, 2] and isinstance(record["still_improving"], bool)
    edited = read_metrics(sweeps / "sweeps" / "source" / "seed=0")
    assert (
        edited["identity"] != record["identity"]
        and edited["code"]["files"]["scaled.py"] != (record["code"]["files"]["scaled.py"])
    )
    assert {k: v for k, v in edited["code"]["files"].items() if k != "scaled.py"} == {
        k: v for k, v in record["code"]["files"].items() if k != "scaled.py"
    }


def test_runs_that_differ_only_in_the_mixers_source_are_two_configurations(sweeps):
    proc = compare(sweeps, "sweeps/first", "sweeps/source", "--out", "cmp_source")
    assert proc.returncode == 0, proc.stderr[-2000:]
    named = configs(sweeps / "cmp_source" / "summary.csv")
    versions = [c for c in named if c.startswith("model=scaled (code: scaled.py ")]
    assert len(versions) == 2 and named == {"model=dot": 2, **dict.fromkeys(versions, 2)}
    assert "the runs ran other versions of the code (scaled.py: " in proc.stdout


def test_runs_that_differ_only_in_a_config_files_value_are_two_configurations(sweeps):
    proc = compare(sweeps, "sweeps/first", "sweeps/value", "--out", "cmp_value")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert configs(sweeps / "cmp_value" / "summary.csv") == {
        "model=dot": 2,
        "model=scaled (scale=0.5)": 2,
        "model=scaled (scale=1.0)": 2,
    }
    assert "model.scale differs between runs although no override set it" in proc.stdout


def test_a_default_spelled_out_and_options_that_cannot_change_the_method_are_one_configuration(sweeps):
    proc = compare(sweeps, "sweeps/first", "sweeps/spelled", "--out", "cmp_spelled")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert configs(sweeps / "cmp_spelled" / "summary.csv") == {"model=dot": 4, "model=scaled": 2}


def test_a_verdict_from_two_seeds_says_so_and_the_summary_leads_with_the_primary_metric(sweeps):
    summary = (sweeps / "sweeps" / "first" / "summary.md").read_text()
    assert summary.startswith("**Primary metric test/acc.** model=scaled vs model=dot: ")
    row = next(
        line
        for line in summary.split("### test/acc (primary; higher is better)")[1].splitlines()
        if line.startswith("| model=scaled")
    )
    assert "only 2 seeds" in row
    improving = [read_metrics(p)["still_improving"] for p in run_dirs(sweeps / "sweeps" / "first")]
    if any(improving):
        assert "still improving at their last epoch" in row


def test_a_finished_run_is_skipped_and_resume_continues_the_same_seed_only(tmp_path):
    run_cli(tmp_path, *BUDGET, "seed=5")
    (first,) = run_dirs(tmp_path / "outputs")
    again = run_cli(tmp_path, *BUDGET, "seed=5", "threads=1", "module.optimizer.lr=0.003", "resume=true")
    assert "already finished in" in again.stderr and run_dirs(tmp_path / "outputs") == [first]
    other_seed = run_cli(tmp_path, *BUDGET, "seed=6", "resume=true")  # the seed is part of what a run is
    assert "Nothing to resume" in other_seed.stderr and "already finished" not in other_seed.stderr
    (second,) = set(run_dirs(tmp_path / "outputs")) - {first}
    assert second.parent == first.parent and read_metrics(second)["seed"] == 6
    longer = run_cli(tmp_path, "trainer.max_epochs=3", *BUDGET[1:], "seed=5", "resume=true")
    assert "Nothing to resume" in longer.stderr and len(run_dirs(tmp_path / "outputs")) == 3
    assert read_metrics(first)["status"] == "ok"


def test_an_edited_mixer_is_a_new_configuration_and_its_earlier_run_is_kept(tmp_path):
    (tmp_path / "configs" / "model").mkdir(parents=True)
    (tmp_path / "scaled.py").write_text(MIXER)
    (tmp_path / "configs" / "model" / "scaled.yaml").write_text(CONFIG.format(scale=1.0))
    run_cli(tmp_path, "model=scaled", *BUDGET, "seed=7")
    (folder,) = run_dirs(tmp_path / "outputs")
    stopped = {**read_metrics(folder), "status": "interrupted"}  # as a run stopped by Ctrl-C leaves it
    (folder / "metrics.json").write_text(json.dumps(stopped))
    (tmp_path / "scaled.py").write_text(MIXER + "\n# the score, tried again\n")
    fresh = run_cli(tmp_path, "model=scaled", *BUDGET, "seed=7", "resume=true")
    assert f"Runs of other versions: {folder.relative_to(tmp_path)} (code: scaled.py differ)" in fresh.stderr
    assert read_metrics(folder) == stopped and len(run_dirs(tmp_path / "outputs")) == 2
    (tmp_path / "scaled.py").write_text(MIXER)
    refused = run_cli(tmp_path, "model=scaled", *BUDGET, "seed=7", check=False)  # its folder holds a stopped run
    assert refused.returncode == 2 and "add resume=true to continue it" in refused.stderr
    resumed = run_cli(tmp_path, "model=scaled", *BUDGET, "seed=7", "resume=true")
    record = read_metrics(folder)
    assert record["status"] == "ok" and "Resuming from" in resumed.stderr
    assert record["command"] == ["attnexp", "model=scaled", *BUDGET, "seed=7"]  # the first command is kept
    assert record["resumed"][-1]["command"][-1] == "resume=true" and record["resumed"][-1]["from"].endswith(".ckpt")
