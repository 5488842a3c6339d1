"""Resume continues only the record of the same run: checkpoints without a record are never mixed with a fresh start,
another configuration's record is never continued, and a folder whose lock another process holds is refused."""

from __future__ import annotations

import fcntl
import json
import shutil

from helpers import read_metrics, run_cli, run_dirs

RUN = [
    "trainer.max_epochs=4",
    "trainer.deterministic=true",
    "data.batch_size=16",
    "callbacks.progress_bar.refresh_rate=0",
]
FINAL = ("test/acc", "test/loss", "val/acc_best", "val/acc", "val/loss", "train/loss")


def test_checkpoints_without_a_record_are_never_mixed_with_a_fresh_start(tmp_path):
    """metrics.json deleted: a new start is refused with the command that continues; that command continues from
    last.ckpt under a new record, and no last-v1.ckpt appears."""
    two = [*RUN[1:], "trainer.max_epochs=2"]
    run_cli(tmp_path, *two)
    (run,) = run_dirs(tmp_path / "outputs")
    (run / "metrics.json").unlink()
    again = run_cli(tmp_path, *RUN[1:], "trainer.max_epochs=2", check=False)
    assert again.returncode == 2 and "holds checkpoints but no record" in again.stderr, again.stderr
    assert "resume=true" in again.stderr and not (run / "metrics.json").exists()
    run_cli(tmp_path, *two, "resume=true")
    record = read_metrics(run)
    assert record["status"] == "ok" and record["resumed"][0]["from"].endswith("checkpoints/last.ckpt"), record
    assert sorted(p.name for p in (run / "checkpoints").glob("last*.ckpt")) == ["last.ckpt"]


def test_resume_continues_only_a_record_of_the_same_identity(tmp_path):
    """A folder whose record is another configuration's (moved, edited): resume=true starts this run fresh under its
    own record, never continuing the other's checkpoints as if they were this run's."""
    two = [*RUN[1:], "trainer.max_epochs=2"]
    run_cli(tmp_path, *two)
    (run,) = run_dirs(tmp_path / "outputs")
    own = read_metrics(run)
    other = {**own, "identity": "0" * len(own["identity"]), "status": "interrupted", "epochs": 1}
    (run / "metrics.json").write_text(json.dumps(other))
    resumed = run_cli(tmp_path, *two, "resume=true")
    record = read_metrics(run)
    assert "Nothing to resume" in resumed.stderr and "Resuming from" not in resumed.stderr, resumed.stderr
    assert record["identity"] == own["identity"] and record["resumed"] == [] and record["status"] == "ok"
    assert {k: record[k] for k in FINAL} == {k: own[k] for k in FINAL}  # trained from the start again: the same numbers


def test_a_folder_another_process_trains_is_refused_before_anything_is_written(tmp_path):
    """The folder's lock held by another process (a file description of its own, as another process holds it): the
    start is refused with exit status 2, naming that process, and writes nothing."""
    run_cli(tmp_path, *RUN[1:], "trainer.max_epochs=1")
    (run,) = run_dirs(tmp_path / "outputs")
    shutil.rmtree(run)
    run.mkdir(parents=True)
    with open(run / ".lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242\n")
        held.flush()
        refused = run_cli(tmp_path, *RUN[1:], "trainer.max_epochs=1", check=False)
    assert refused.returncode == 2 and "is being trained by process 4242" in refused.stderr, refused.stderr
    assert "Run folder" not in refused.stderr  # refused at the pre-flight stage: the lock is found without a record
    assert sorted(p.name for p in run.iterdir()) == [".lock"]  # nothing written: no record, log or event file
