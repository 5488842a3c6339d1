"""Runs that trained or validated nothing never end ``ok`` (finding 3), and they and runs stopped by bad input are
left out of comparisons with a note instead of becoming rows (finding 4)."""

from __future__ import annotations

import csv

from helpers import read_metrics, run_dirs

QUIET = "callbacks.progress_bar.refresh_rate=0"


def test_runs_that_trained_or_validated_nothing_say_so_and_are_left_out(cli, capsys):
    from attnexp.cli.compare import main as compare

    root, untrained = cli("trainer.limit_train_batches=0", "trainer.max_epochs=1", QUIET)
    _, unvalidated = cli("trainer.limit_val_batches=0", "trainer.max_epochs=1", QUIET)
    cli("trainer.max_epochs=1", QUIET)
    by_limit = {}
    for run in run_dirs(root / "outputs"):
        record = read_metrics(run)
        by_limit[next((o for o in record["overrides"] if o.startswith("trainer.limit")), "none")] = record
    first = by_limit["trainer.limit_train_batches=0"]
    assert first["status"] == "untrained" and "no training batch ran (trainer.limit_train_batches=0)" in first["error"]
    assert "Run untrained: no training batch ran" in untrained.stderr
    second = by_limit["trainer.limit_val_batches=0"]
    assert second["status"] == "unvalidated" and "val/acc_best" not in second and "the last weights" in second["error"]
    assert "Run unvalidated: no validation ran (trainer.limit_val_batches=0" in unvalidated.stderr
    assert by_limit["none"]["status"] == "ok"
    capsys.readouterr()

    assert compare([str(root / "outputs"), "--out", str(root / "cmp")]) == 0
    text = capsys.readouterr().out
    rows = list(csv.DictReader((root / "cmp" / "summary.csv").open()))
    assert [(r["config"], r["n"], r["status"]) for r in rows] == [("model=dot", "1", "ok")]
    assert (
        text.count("Left out: ") == 2
        and "(untrained: no training batch ran" in text
        and "(unvalidated: no validation" in text
    )
    assert len(list(csv.DictReader((root / "cmp" / "runs.csv").open()))) == 1


def test_a_run_stopped_by_bad_input_is_no_comparison_row(cli, capsys):
    """It leaves no run folder; a folder an earlier version left for one names no configuration either: the runs that
    trained are compared as if it were not there."""
    from attnexp.cli.compare import main as compare
    from attnexp.runs import metrics_file

    root, _ = cli("trainer.max_epochs=1", QUIET)
    _, bad = cli("trainer.max_epochs=0", QUIET, check=False)
    assert bad.returncode == 2 and "Bad input: trainer.max_epochs=0 is not allowed" in bad.stderr
    assert [read_metrics(run)["status"] for run in run_dirs(root / "outputs")] == ["ok"]
    left = root / "outputs" / "runs" / "earlier_bad_input"
    metrics_file.write(
        left,
        {
            "status": "bad_input",
            "mixer": "dot",
            "data": "digits",
            "seed": 0,
            "error": "trainer.max_epochs=0 is not allowed: a positive integer.",
        },
    )
    capsys.readouterr()
    assert compare([str(root / "outputs"), "--out", str(root / "cmp")]) == 0
    text = capsys.readouterr().out
    (row,) = csv.DictReader((root / "cmp" / "summary.csv").open())
    assert (row["config"], row["n"], row["status"]) == ("model=dot", "1", "ok")
    assert "Baseline: model=dot." in text and text.count("| baseline |") == 3  # one row per metric table
    assert "Left out: " in text and "(bad input: trainer.max_epochs=0 is not allowed" in text
