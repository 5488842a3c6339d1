"""The diagnostic suite from the command line: one sweep over every generated task, the data x mixers table."""

from __future__ import annotations

import csv

from helpers import read_metrics, run_dirs

SMALL = [
    "data.train_size=200",
    "data.val_size=40",
    "data.test_size=40",
    "trainer.max_epochs=1",
    "net.dim=16",
    "callbacks.progress_bar.refresh_rate=0",
]


def test_the_suite_runs_every_task_and_tables_them(cli):
    root, _proc = cli(
        "--multirun", "experiment=diagnostics", "model=dot,masked", "seed=0", *SMALL, "hydra/launcher=basic"
    )
    (sweep,) = [p for p in (root / "outputs" / "multirun").glob("*/*") if p.is_dir()]
    records = {p.relative_to(sweep).as_posix(): read_metrics(p) for p in run_dirs(sweep)}
    tasks = ("listops", "mqar", "recall", "selective_copy", "seqops")
    assert set(records) == {f"model={m}/data={t}" for m in ("dot", "masked") for t in tasks}
    for name, record in records.items():
        assert record["status"] == "ok" and 0 < record["chance"] < 1, name
        assert {"test/acc", "val/acc_best"} <= set(record), name
        assert ("test/seq_acc" in record) == ("listops" not in name)
    assert {"test/acc@len=8", "test/acc@len=32"} <= set(records["model=dot/data=seqops"])
    assert (
        records["model=dot/data=listops"]["net"] == "encoder"
        and records["model=dot/data=mqar"]["task"] == "answer_tokens"
    )
    summary = (sweep / "summary.md").read_text()
    table = summary.split("### Data x mixers")[1]
    assert (
        "| mixer | listops (test/acc) | mqar (test/acc) | recall (test/acc) | selective_copy (test/acc) "
        "| seqops (test/acc) |"
    ) in table
    chance = {
        name.split("/")[1].split("=")[1]: record["chance"]
        for name, record in records.items()
        if name.startswith("model=dot")
    }
    assert "| chance | " + " | ".join(f"{chance[t]:.4f}" for t in tasks) + " |" in table
    rows = list(csv.DictReader((sweep / "data.csv").open()))
    cells = [r for r in rows if r["data"] in tasks]
    assert len(cells) == 2 * 5
    scores = {
        r["data"]: (float(r["mean"]) - chance[r["data"]]) / (1 - chance[r["data"]])
        for r in cells
        if r["mixer"] == "model=dot"
    }
    dot_mean = next(r for r in rows if r["mixer"] == "model=dot" and r["metric"] == "mean of normalised scores")
    assert abs(float(dot_mean["mean"]) - sum(scores.values()) / 5) < 1e-9  # one seed: its normalised scores' mean
    assert any(
        r["metric"] == "P(improvement over model=dot) of normalised scores" and r["mixer"] == "model=masked"
        for r in rows
    )
    assert (sweep / "performance_profile.png").is_file() and "adjusted p" in summary
    mqar = summary.split("\n## data=mqar")[1].split("\n## ")[0]  # a table per task and data set
    assert "| model=masked | 1 |" in mqar and "Δ vs model=dot" in mqar
