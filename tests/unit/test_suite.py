"""Summaries of sweeps over tasks and difficulties: baselines within each task, the tasks x variants table with a
mean score, curves against a numeric setting, and runs left at chance."""

from __future__ import annotations

import csv

import pytest
from run_records import record
from scipy import stats as sp

from attnexp.cli.compare import main
from attnexp.comparison import suite as suite_module
from attnexp.comparison.naming import find_runs
from attnexp.comparison.suite import knobs
from attnexp.comparison.summary import compare


def fake_run(root, overrides: list[str], acc: float, chance: float = 0.01):
    settings = dict(o.split("=", 1) for o in overrides)
    typed = [o for o in overrides if o.split("=")[0] not in ("model", "seed")]
    changes = {k: float(v) if "." in v else int(v) for k, v in settings.items() if "." in k}
    data = settings.get("data", "mqar")
    record(
        root,
        "/".join(overrides),
        settings["model"],
        int(settings["seed"]),
        acc,
        data=data,
        overrides=typed,
        changes=changes,
        classes=64,
        chance=chance,
        epochs=2,
    )


SCORES = {("mqar", "dot"): 0.9, ("mqar", "euclid"): 0.6, ("recall", "dot"): 0.5, ("recall", "euclid"): 0.5}


def task_sweep(root):
    for (data, model), acc in SCORES.items():
        for seed in range(3):
            chance = 0.5 if data == "recall" else 0.01  # recall's runs stay at chance
            fake_run(
                root, [f"data={data}", f"model={model}", f"seed={seed}"], acc + 0.01 * seed * (model == "dot"), chance
            )


def test_variants_are_compared_within_each_task(tmp_path, monkeypatch):
    monkeypatch.setattr(suite_module, "REPS", 200)
    task_sweep(tmp_path)
    c = compare(find_runs([tmp_path]))
    tables = {t.label: {r.config: r for r in t.rows} for t in c.tables}
    assert set(tables) == {"data=mqar", "data=recall"}
    for label, gap in (("data=mqar", -0.31), ("data=recall", -0.01)):
        euclid = tables[label]["model=euclid"]
        assert euclid.baseline == "model=dot" and {r.metrics["data"] for r in euclid.runs} == {label[5:]}
        assert abs(euclid.diffs["test/acc"].mean - gap) < 1e-9
    assert any("data=recall: model=euclid seed 0 stayed at chance" in w and "chance 0.5000" in w for w in c.warnings)
    assert not any("data=mqar" in w for w in c.warnings)


def test_data_by_mixers_table_and_aggregates_over_the_data(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(suite_module, "REPS", 200)  # fewer resamples: the same code, faster
    task_sweep(tmp_path / "runs")
    out = tmp_path / "cmp"
    assert main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    table = text.split("### Data x mixers")[1].split("###")[0]
    dot = next(line for line in table.splitlines() if line.startswith("| model=dot |"))
    euclid = next(line for line in table.splitlines() if line.startswith("| model=euclid |"))
    assert "| mixer | mqar (test/acc) | recall (test/acc) |" in table and "| chance | 0.0100 | 0.5000 |" in table
    assert dot.count("[") == 2 and "0.9100 [" in dot and "(3 at chance)" in dot
    assert euclid == "| model=euclid | 0.6000 [0.6000, 0.6000] | 0.5000 [0.5000, 0.5000] (3 at chance) |"
    # Normalised scores (chance 0, best 1) of the seeds that ran both data options: IQM, mean, P(improvement).
    agg = compare(find_runs([tmp_path / "runs"])).suite.aggregates
    dot_scores = [(0.90 + 0.01 * s - 0.01) / 0.99 for s in range(3)] + [(0.01 * s) / 0.5 for s in range(3)]
    euclid_scores = [(0.6 - 0.01) / 0.99] * 3 + [0.0] * 3
    assert (
        agg.data == ["mqar", "recall"] and agg.baseline == "model=dot" and agg.seeds["model=euclid"] == ["0", "1", "2"]
    )
    assert agg.iqm["model=dot"].value == pytest.approx(sp.trim_mean(dot_scores, 0.25))
    assert agg.mean["model=euclid"].value == pytest.approx(sum(euclid_scores) / 6)
    per_data = [
        sp.mannwhitneyu(euclid_scores[:3], dot_scores[:3]).statistic / 9,
        sp.mannwhitneyu(euclid_scores[3:], dot_scores[3:]).statistic / 9,
    ]
    assert (
        agg.improvement["model=euclid"].value == pytest.approx(sum(per_data) / 2) and "model=dot" not in agg.improvement
    )
    for e in (agg.iqm["model=dot"], agg.mean["model=dot"], agg.improvement["model=euclid"]):
        assert e.low <= e.value <= e.high
    aggregates = text.split("### Aggregates over 2 data options")[1]
    assert "| mixer | seeds | IQM [95% CI] | mean [95% CI] | P(improvement over model=dot) [95% CI] |" in aggregates
    assert f"| model=euclid | 0, 1, 2 | {agg.iqm['model=euclid'].value:.4f} [" in aggregates
    rows = list(csv.DictReader((out / "data.csv").open()))
    assert {(r["mixer"], r["data"]) for r in rows} >= {("model=dot", "mqar"), ("model=euclid", "mqar, recall")}
    assert any(r["metric"] == "P(improvement over model=dot) of normalised scores" for r in rows)
    assert (out / "performance_profile.png").stat().st_size > 10_000
    tex = (out / "summary.tex").read_text()
    assert "Mixer & mqar & recall" in tex and "Mixer & IQM & Mean & P(improvement)" in tex


def test_a_numeric_setting_the_sweep_varies_gets_a_curve(tmp_path):
    for pairs in (4, 8, 16):
        for model in ("dot", "euclid"):
            for seed in range(2):
                fake_run(
                    tmp_path / "runs",
                    [f"data.num_pairs={pairs}", f"model={model}", "module.optimizer.lr=0.001", f"seed={seed}"],
                    1.0 - pairs / 32 - 0.1 * (model == "euclid") + 0.01 * seed,
                )
    runs = find_runs([tmp_path / "runs"])
    assert knobs(runs, ["module.optimizer.lr"]) == ["data.num_pairs"]
    assert compare(runs).suite is None  # one task: no tasks table
    out = tmp_path / "cmp"
    assert main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    assert (out / "test_acc_vs_data.num_pairs.png").stat().st_size > 10_000
    c = compare(runs)
    rows = {r.config: r for r in c.rows}
    assert rows["model=euclid,data.num_pairs=16"].baseline == "model=dot,data.num_pairs=16"


def test_a_sweep_of_one_task_keeps_one_baseline(tmp_path):
    for model, acc in (("dot", 0.8), ("euclid", 0.7), ("se", 0.6)):
        for seed in range(2):
            fake_run(tmp_path, [f"model={model}", f"seed={seed}"], acc + 0.01 * seed)
    c = compare(find_runs([tmp_path]))
    assert c.tables[0].baseline == "model=dot" and {r.baseline for r in c.rows} == {"model=dot"}
    assert c.suite is None and knobs(c.runs, []) == []
