"""A sweep's comparison end to end: folders named by what varies, the tuned table, runs.csv, LaTeX, TensorBoard
contents (hparams, epoch steps, text) and a quiet console."""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from helpers import read_events, read_metrics, run_dirs

from attnexp.training.callbacks.tensorboard_hparams import CURATED

LRS = ("0.001", "0.01")


# under pytest -n: the module's tests on one worker, which builds its runs once
pytestmark = pytest.mark.xdist_group("comparison")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    from helpers import run_cli

    root = tmp_path_factory.mktemp("comparison")
    proc = run_cli(
        root,
        "--multirun",
        "model=dot,euclid",
        "seed=0,1,2",
        f"module.optimizer.lr={','.join(LRS)}",
        "trainer.max_epochs=2",
        "trainer.limit_train_batches=8",
        "hydra/launcher=basic",  # one job after another: the comparison is the subject here
    )
    (folder,) = [p for p in (root / "outputs" / "multirun").glob("*/*") if p.is_dir()]
    return folder, proc


def test_job_folders_are_named_by_what_varies_variant_first(sweep):
    folder, _ = sweep
    names = {p.relative_to(folder).as_posix() for p in run_dirs(folder)}
    assert names == {
        f"model={m}/module.optimizer.lr={lr}/seed={s}" for m in ("dot", "euclid") for lr in LRS for s in range(3)
    }


def test_console_is_one_line_per_job_and_the_summary_comes_last(sweep):
    _, proc = sweep
    jobs = [line for line in proc.stderr.splitlines() if "Job #" in line]
    assert len(jobs) == 12 and not [j for j in jobs if ": ok, test/acc " not in j or not j.endswith(" s")], [
        j for j in jobs if ": ok, test/acc " not in j or not j.endswith(" s")
    ]
    output = proc.stdout + proc.stderr
    assert (
        "Tip:" not in output and "┏" not in output and "Epoch 0" not in output
    )  # no advertising, tables or progress bars
    assert proc.stdout.rstrip().splitlines()[-1].startswith(("| ", "- "))  # the summary's last table row or warning
    assert len(proc.stdout.splitlines()) < 100


def test_runs_csv_matches_every_record_and_the_tuned_table_picks_the_best_rate(sweep):
    folder, proc = sweep
    records = {p: read_metrics(p) for p in run_dirs(folder)}
    rows = list(csv.DictReader((folder / "runs.csv").open()))
    assert len(rows) == 12
    for row in rows:
        record = json.loads((Path(row["folder"]) / "metrics.json").read_text())
        for key in ("test/acc", "test/loss", "val/acc_best", "params"):
            assert float(row[key]) == pytest.approx(record[key], rel=1e-12)
        assert row["seed"] == str(record["seed"]) and row["config"].startswith(f"model={record['mixer']},")
    scores = defaultdict(list)  # the rule, computed here: the lr with the best mean monitor_best (val/acc, highest)
    for record in records.values():
        overrides = dict(o.split("=", 1) for o in record["overrides"])
        scores[record["mixer"], overrides["module.optimizer.lr"]].append(record["monitor_best"])
    expected = {
        f"model={m}": f"module.optimizer.lr={max(LRS, key=lambda lr: statistics.fmean(scores[m, lr]))}"
        for m in ("dot", "euclid")
    }
    tuned = {r["config"]: r["tuned"] for r in csv.DictReader((folder / "summary.csv").open()) if r["table"] == "tuned"}
    assert tuned == expected
    assert "### Each configuration at its best module.optimizer.lr" in proc.stdout and "Rule:" in proc.stdout


def test_latex_table_parses_as_a_tabular(sweep):
    folder, _ = sweep
    tex = (folder / "summary.tex").read_text()
    lines = tex.split("\\begin{tabular}{")[1].split("\\end{tabular}")[0].splitlines()
    columns = len(lines[0].rstrip("}"))
    rows = [line for line in lines[1:] if line.endswith("\\\\")]
    assert len(rows) == 1 + 4 and all(line.count("&") == columns - 1 for line in rows)  # header + 4 configurations
    assert lines[1] == "\\toprule" and "\\midrule" in lines and lines[-1] == "\\bottomrule"


def test_tensorboard_runs_declare_the_same_hparams_and_log_by_epoch(sweep):
    folder, _ = sweep
    declared = []
    for run in run_dirs(folder):
        events = read_events(run)
        scalars, hparams, texts = events.scalars, events.hparams, events.texts
        declared.append(frozenset(hparams))
        assert set(CURATED) <= hparams and "module.optimizer.lr" in hparams
        assert events.experiments == 1 and set(CURATED) <= set(events.columns)
        assert events.steps["val/acc"] == events.steps["train/loss"] == events.steps["attn/layer0/entropy"] == [1, 2]
        assert "epoch" not in scalars and "train/lr" in scalars and not any(t.startswith("lr-") for t in scalars)
        assert "config" in texts
        assert yaml.safe_load((run / "hparams.yaml").read_text())["mixer"] == read_metrics(run)["mixer"]
    assert len(set(declared)) == 1
    assert "sweep summary" in read_events(folder / "summary").texts
