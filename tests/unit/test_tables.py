"""Comparisons that cannot mislead: one table per task and data set with its own primary metric and families of
tests, a baseline from the same table or none, margins in the units the metric counts, and records that cannot be
compared named and left out."""

from __future__ import annotations

import json
import math

import pytest
from run_records import record

from attnexp.cli.compare import main
from attnexp.comparison import suite
from attnexp.comparison.files import plot_names
from attnexp.comparison.naming import find_runs
from attnexp.comparison.render import markdown
from attnexp.comparison.summary import compare

CORPUS = {"examples": {"val": 7, "test": 7}, "scored": {"val": {"acc": 56}, "test": {"acc": 56}}}  # 7 windows of 8


def corpus_run(root, name: str, mixer: str, seed: int, acc: float, ppl: float):
    return record(root, name, mixer, seed, acc, data="corpus", **CORPUS, **{"test/ppl": ppl, "val/loss": math.log(ppl)})


def test_a_row_without_a_baseline_of_its_data_says_so_and_never_meets_another_datas(tmp_path, monkeypatch):
    """dot on digits and on the corpus, a mixer of one's own on digits at two values of its option: the digits rows
    are compared with digits' dot (the option goes with the mixer), never with the corpus'."""
    record(tmp_path, "dot_digits", "dot", 0, 0.36)
    corpus_run(tmp_path, "dot_corpus", "dot", 0, 0.547, 1.3)
    for k, acc in ((1, 0.40), (2, 0.42)):
        record(tmp_path, f"mine_{k}", "mine", 0, acc, overrides=[f"model.k={k}"], changes={"model.k": k})
    c = compare(find_runs([tmp_path]))
    assert [t.label for t in c.tables] == ["data=corpus", "data=digits"]
    corpus, digits = c.tables
    assert corpus.primary == "test/ppl" and digits.primary == "test/acc"
    rows = {r.config: r for r in digits.rows}
    for k, acc in ((1, 0.40), (2, 0.42)):
        row = rows[f"model=mine,model.k={k}"]
        assert row.baseline == "model=dot" and row.diffs["test/acc"].mean == pytest.approx(acc - 0.36)
    # The corpus table's dot has nothing to be compared with; a digits mixer without digits' dot says it has none.
    record(tmp_path / "alone", "euclid", "euclid", 0, 0.5)
    corpus_run(tmp_path / "alone", "dot_corpus", "dot", 0, 0.547, 1.3)
    (euclid,) = compare(find_runs([tmp_path / "alone"]), baseline="model=dot").tables[1].rows
    assert euclid.baseline == "" and euclid.verdicts["test/acc"] == "no baseline: no run of model=dot on data=digits"


def test_two_sweeps_of_other_data_keep_their_own_tables_and_headlines(tmp_path, monkeypatch):
    monkeypatch.setattr(suite, "REPS", 200)  # fewer resamples for the aggregates over the two tables: the same code
    for seed in range(3):
        record(tmp_path / "digits", f"dot/{seed}", "dot", seed, 0.50 + 0.05 * seed)
        record(tmp_path / "digits", f"euclid/{seed}", "euclid", seed, 0.48 + 0.05 * seed + 0.002 * seed)
        corpus_run(tmp_path / "corpus", f"dot/{seed}", "dot", seed, 0.89, 1.24 + 0.03 * seed)
        corpus_run(tmp_path / "corpus", f"euclid/{seed}", "euclid", seed, 0.87, 1.30 + 0.02 * seed + 0.004 * seed)
    alone = markdown(compare(find_runs([tmp_path / "corpus"])))
    headline = alone.splitlines()[0]
    assert headline.startswith("**Primary metric test/ppl.** model=euclid vs model=dot:")
    c = compare(find_runs([tmp_path / "digits", tmp_path / "corpus"]))
    both = markdown(c)
    corpus = both.split("## data=corpus")[1].split("## data=digits")[0]
    assert headline in corpus and "**Primary metric test/acc.**" not in corpus
    digits = both.split("## data=digits")[1]
    assert digits.splitlines()[2].startswith("**Primary metric test/acc.** model=euclid vs model=dot:")
    for section in (corpus, digits):  # seeds paired within a table, three to a row
        assert "| model=euclid | 3 |" in section and "(paired t)" in section
    assert {"data=corpus_test_ppl.png", "data=digits_test_acc.png", "data=digits_val_curves.png"} <= set(plot_names(c))


def test_next_token_accuracy_margin_counts_tokens_not_windows(tmp_path):
    """A 4-point drop in next-token accuracy on 56 scored tokens (7 windows) is not equivalent within ±0.143."""
    for seed, (dot, euclid) in enumerate([(0.8929, 0.8571), (0.8929, 0.8393), (0.8750, 0.8393)]):
        corpus_run(tmp_path, f"dot/{seed}", "dot", seed, dot, 1.3)
        corpus_run(tmp_path, f"euclid/{seed}", "euclid", seed, euclid, 1.3)
    (table,) = compare(find_runs([tmp_path])).tables
    euclid = next(r for r in table.rows if r.config == "model=euclid")
    p = 0.8869
    assert euclid.diffs["test/acc"].margin == pytest.approx(math.sqrt(p * (1 - p) / 56), abs=1e-4)
    assert table.margins["test/acc"] == ["1 SE at 56 scored predictions"]
    assert not euclid.verdicts["test/acc"].startswith("equivalent")


def test_damaged_records_and_records_of_another_schema_are_named_and_left_out(tmp_path, capsys):
    for seed in range(3):
        record(tmp_path / "runs", f"dot/{seed}", "dot", seed, 0.80 + 0.01 * seed)
        record(tmp_path / "runs", f"euclid/{seed}", "euclid", seed, 0.82 + 0.01 * seed)
    truncated = tmp_path / "runs" / "euclid" / "2" / "metrics.json"
    truncated.write_text(truncated.read_text()[:100])
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert f"- Left out: {truncated} is damaged (" in out and "| model=euclid | 2 |" in out
    # Records an earlier attnexp wrote (no schema, no config): mine at lr 3e-3 and dot at 1e-3 are never paired.
    for seed in range(3):
        for mixer, acc, lr in (("dot", 0.80, 1e-3), ("mine", 0.85, 3e-3)):
            old = tmp_path / "old" / f"{mixer}{seed}"
            old.mkdir(parents=True)
            fields = {"status": "ok", "mixer": mixer, "data": "digits", "seed": seed, "test/acc": acc + 0.01 * seed}
            (old / "metrics.json").write_text(json.dumps(fields | {"lr": lr}))
    assert main([str(tmp_path / "old"), "--out", str(tmp_path / "old_cmp")]) == 2
    err = capsys.readouterr().err
    assert err.count("is a record of schema none, not 2 (written by an earlier attnexp)") == 6
    assert str(tmp_path / "old" / "mine0" / "metrics.json") in err and "better" not in err
    assert not (tmp_path / "old_cmp").exists()
    for seed in (0, 1):
        (tmp_path / "runs" / "euclid" / str(seed) / "metrics.json").write_text("")
    assert main([str(tmp_path / "runs" / "euclid"), "--out", str(tmp_path / "none")]) == 2  # nothing comparable left
    assert capsys.readouterr().err.count("is damaged") == 3


def test_a_record_of_a_newer_schema_is_said_to_be_a_newer_attnexps(tmp_path, capsys):
    """A record of schema 99 was said to be written by an earlier attnexp."""
    record(tmp_path / "runs", "dot", schema=99)
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "cmp")]) == 2
    err = capsys.readouterr().err
    assert "is a record of schema 99, not 2 (written by a newer attnexp)" in err and "upgrade attnexp" in err
    assert "earlier" not in err and not (tmp_path / "cmp").exists()


def test_a_folder_name_too_long_to_look_up_is_no_such_folder(tmp_path, capsys):
    """Python 3.11's pathlib raised OSError (File name too long) where the folder is simply not there."""
    from attnexp.runs import metrics_file

    long = str(tmp_path / ("x" * 300))
    assert metrics_file.read(long) == {}
    assert main([long]) == 2 and f"no such folder: {long[:40]}" in capsys.readouterr().err
