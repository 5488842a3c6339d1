"""attnexp-compare on run folders made here: tables, files, warnings and the overwrite guard."""

from __future__ import annotations

import csv
import json
import re

import pytest
from run_records import record

from attnexp.cli.compare import main
from attnexp.comparison.files import OverwriteError, write_all
from attnexp.comparison.naming import find_runs
from attnexp.comparison.summary import compare


def fake_run(root, overrides: list[str], **metrics):
    settings = dict(o.split("=", 1) for o in overrides)
    lr = {"module.optimizer.lr": float(settings["module.optimizer.lr"])} if "module.optimizer.lr" in settings else {}
    return record(
        root,
        "_".join(o.replace("/", "_") for o in overrides),
        settings["model"],
        int(settings["seed"]),
        None,
        overrides=[o for o in overrides if not o.startswith(("model=", "seed="))],
        changes=lr | {"trainer.max_epochs": 2},
        seconds_per_epoch=1.0,
        **metrics,
    )


def sweep(root, n_seeds=3, lrs=(1e-3,), score=lambda model, lr, seed: 0.5):
    for model in ("dot", "euclid"):
        for lr in lrs:
            for seed in range(n_seeds):
                acc = score(model, lr, seed)
                lr_override = [f"module.optimizer.lr={lr}"] if len(lrs) > 1 else []
                fake_run(
                    root,
                    [f"model={model}", *lr_override, f"seed={seed}"],
                    **{
                        "test/acc": acc,
                        "val/acc_best": acc + 0.01,
                        "test/loss": 1 - acc,
                        "monitor_best": acc + 0.01,
                        "params": 100 if model == "dot" else 120,
                    },
                )


def test_files_tables_and_a_clear_verdict(tmp_path, capsys):
    sweep(
        tmp_path / "runs",
        score=lambda model, lr, seed: 0.80 + 0.01 * seed + ((0.05 + 0.004 * (seed == 1)) if model == "euclid" else 0.0),
    )
    out = tmp_path / "cmp"
    assert main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "### test/acc (primary; higher is better)" in text and "Baseline: model=dot" in text
    euclid = next(line for line in text.splitlines() if line.startswith("| model=euclid | 3 |"))
    assert "0.8500, 0.8640, 0.8700" in euclid and "+0.0513 [+0.0456, +0.0571]" in euclid
    assert re.search(r"\| 0\.00[0-9]+ \(paired t\) \| 0\.00[0-9]+ \| better \|$", euclid), euclid
    loss_row = next(line for line in text.split("### test/loss")[1].splitlines() if line.startswith("| model=euclid"))
    assert loss_row.endswith("| better |")  # lower loss is better
    assert "model=euclid has 120 parameters, 1.20x the baseline's 100" in text
    assert {p.name for p in out.iterdir()} >= {
        "summary.md",
        "summary.csv",
        "runs.csv",
        "summary.tex",
        "test_acc.png",
        "test_loss.png",
        "val_curves.png",
    }
    runs = list(csv.DictReader((out / "runs.csv").open()))
    assert len(runs) == 6
    for row in runs:
        record = json.loads((tmp_path / "runs" / row["folder"].split("/")[-1] / "metrics.json").read_text())
        assert float(row["test/acc"]) == record["test/acc"] and int(row["seed"]) == record["seed"]
    tex = (out / "summary.tex").read_text()
    spec = re.search(r"\\begin\{tabular\}\{([lcr]+)\}", tex).group(1)
    body = tex.split("\\midrule")[1].split("\\bottomrule")[0].strip().splitlines()
    header = tex.split("\\toprule")[1].split("\\midrule")[0].strip()
    assert len(body) == 2 and all(
        line.endswith("\\\\") and line.count("&") == len(spec) - 1 for line in [header, *body]
    )
    assert "\\pm" in body[0] and "model=euclid" in body[1]


def test_one_seed_says_so_and_at_chance_is_flagged(tmp_path, capsys):
    sweep(tmp_path / "runs", n_seeds=1, score=lambda model, lr, seed: 0.1)
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "cmp")]) == 0
    text = capsys.readouterr().out
    assert "n=1, no spread" in text and "n=1, no test" in text and "± 0.0000" not in text
    assert "model=dot seed 0 stayed at chance" in text


def test_tuned_table_picks_each_configuration_at_its_best_rate(tmp_path, capsys):
    best = {"dot": 1e-3, "euclid": 1e-2}
    sweep(
        tmp_path / "runs",
        lrs=(1e-3, 1e-2),
        score=lambda model, lr, seed: 0.9 if lr == best[model] else 0.6 + 0.01 * seed,
    )
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "cmp"), "--baseline", "model=dot"]) == 0
    tuned = capsys.readouterr().out.split("### Each configuration at its best module.optimizer.lr")[1]
    grid = "module.optimizer.lr in {0.001, 0.01}"  # each row shows the grid its rate was picked from
    assert (
        f"| model=dot (module.optimizer.lr=0.001) | {grid} | 3 |" in tuned
        and f"| model=euclid (module.optimizer.lr=0.01) | {grid} | 3 |" in tuned
    )
    rows = [r for r in csv.DictReader((tmp_path / "cmp" / "summary.csv").open()) if r["table"] == "tuned"]
    assert {r["config"]: r["tuned"] for r in rows} == {
        "model=dot": "module.optimizer.lr=0.001",
        "model=euclid": "module.optimizer.lr=0.01",
    }


def test_out_refuses_a_folder_of_other_files_and_replaces_an_earlier_comparison(tmp_path, capsys):
    sweep(tmp_path / "runs")
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    assert main([str(tmp_path / "runs"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"attnexp-compare: --out {out} holds files that no comparison wrote; nothing was written")
    assert len(err.strip().splitlines()) == 1 and [p.name for p in out.iterdir()] == ["notes.txt"]
    for given in (out / "notes.txt", out / "notes.txt" / "cmp"):  # a file: FileExistsError's traceback, exit 1
        assert main([str(tmp_path / "runs"), "--out", str(given)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"attnexp-compare: --out {given} ") and "a file, not a folder" in err
        assert len(err.strip().splitlines()) == 1 and (out / "notes.txt").read_text() == "my notes"
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "again")]) == 0
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "again")]) == 0  # its own files: replaced
    # A sweep's folder holds its runs: the summary goes there, but never over a file of the same name it did not write.
    (tmp_path / "runs" / "summary.md").write_text("my notes")
    with pytest.raises(OverwriteError, match=r"already holds summary\.md"):
        write_all(compare(find_runs([tmp_path / "runs"])), tmp_path / "runs")
    assert (tmp_path / "runs" / "summary.md").read_text() == "my notes"


def test_default_output_is_a_new_folder_and_a_bad_baseline_is_explained(tmp_path, capsys, monkeypatch):
    sweep(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    assert main([str(tmp_path / "runs"), "--baseline", "model=cosine"]) == 2
    assert "no configuration matches the baseline 'model=cosine'" in capsys.readouterr().err
    assert main([str(tmp_path / "runs"), str(tmp_path / "runs" / "model=dot_seed=0")]) == 0  # one folder, given twice
    (made,) = (tmp_path / "comparison").iterdir()
    assert (made / "summary.md").exists() and not (tmp_path / "runs" / "summary.md").exists()
