"""Run folders and records: a run's folder follows from its identity and seed, what a folder holds decides what a new
start does, a record left at running by a process that is gone reads abandoned, and which runs a comparison takes."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import compose_cfg

from attnexp.runs import metrics_file
from attnexp.runs.folders import run_folder, state


def test_a_runs_folder_follows_from_its_identity_and_seed(tmp_path):
    """outputs/runs/<mixer>_<data>_<identity>/seed=<n>: the seed is a folder of its own under its configuration, and
    settings that cannot change a number find the same folder."""

    def folder(*overrides):
        return Path(run_folder(_root_=compose_cfg([f"paths.log_dir={tmp_path}", *overrides], tmp_path)))

    plain = folder()
    assert plain.parent.parent == tmp_path / "runs" and plain.name == "seed=0"
    assert re.fullmatch(r"dot_digits_[0-9a-f]{8}", plain.parent.name)
    assert folder("threads=1", "callbacks.progress_bar.refresh_rate=0") == plain
    assert folder("seed=1") == plain.parent / "seed=1"
    assert folder("module.optimizer.lr=0.01").parent != plain.parent
    assert folder("model=euclid").parent.name.startswith("euclid_digits_")


def test_what_a_run_folder_holds_decides_what_a_new_start_does(tmp_path):
    alive = {"host": socket.gethostname(), "pid": os.getpid()}
    cases = {
        "empty": ({}, "new"),
        "finished": ({"status": "ok", **alive}, "finished"),
        "diverged": ({"status": "diverged", **alive}, "finished"),  # a rerun would diverge again
        "interrupted": ({"status": "interrupted", **alive}, "unfinished"),
        "failed": ({"status": "failed", **alive}, "unfinished"),
        "failed before its first checkpoint": ({"status": "failed", **alive}, "restart"),  # nothing to continue
        "training": ({"status": "running", **alive}, "running"),
        "checkpoints without a record": ({}, "orphaned"),
    }
    for name, (record, kind) in cases.items():
        if record:
            metrics_file.write(tmp_path / name, record)
        if kind in ("unfinished", "orphaned"):
            (tmp_path / name / "checkpoints").mkdir(parents=True)
            (tmp_path / name / "checkpoints" / "last.ckpt").write_bytes(b"")
        assert state(tmp_path / name)[0] == kind, name


def test_a_damaged_record_is_named_not_a_traceback(tmp_path):
    (tmp_path / "metrics.json").write_text('{"status": "ok", "test/a')
    # the path as the message gives it: relative to the working folder where it lies under it
    with pytest.raises(metrics_file.DamagedRecord, match=rf"{tmp_path.name}/metrics.json is damaged"):
        metrics_file.read(tmp_path)


def test_a_record_left_running_by_a_process_that_is_gone_reads_abandoned(tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    here = {"status": "running", "host": socket.gethostname()}
    cases = {
        "alive": ({**here, "pid": os.getpid()}, "running"),
        "gone": ({**here, "pid": int(ended.stdout)}, "abandoned"),
        "other host": ({**here, "host": "elsewhere", "pid": int(ended.stdout)}, "running"),  # cannot be told
        "finished": ({**here, "status": "ok", "pid": int(ended.stdout)}, "ok"),
        "old record": ({"status": "running"}, "running"),
    }
    for name, (record, status) in cases.items():
        metrics_file.write(tmp_path / name, record)
        assert metrics_file.current_status(record, tmp_path / name) == status, name


def test_a_process_started_after_the_record_was_written_is_another_one(tmp_path):
    """A pid used again by a later process does not keep a dead run's record alive (Linux knows start times)."""
    if not os.path.exists("/proc/self/stat"):
        return
    assert metrics_file.process_alive(os.getpid(), since=time.time())  # this process wrote a record just now
    assert not metrics_file.process_alive(os.getpid(), since=0.0)  # a record written in 1970 was another process's


def test_bad_input_and_runs_without_numbers_are_left_out_of_comparisons():
    left_out = [
        s
        for s in (
            "running",
            "trained",
            "ok",
            "failed",
            "diverged",
            "interrupted",
            "abandoned",
            "bad_input",
            "untrained",
            "unvalidated",
        )
        if not metrics_file.comparable(s)
    ]
    assert left_out == ["bad_input", "untrained", "unvalidated"]


def test_a_full_disk_leaves_a_whole_record_never_half_of_one(tmp_path, monkeypatch):
    """No space for the temporary file: a failure's record that fits in the old record's blocks is written over it
    (compact), one that does not leaves the old record whole; never a record cut short."""
    import errno
    import json

    old = {"status": "running", "train/loss": [0.5] * 50}
    metrics_file.write(tmp_path, old)
    real = Path.write_text

    def full(self, *args, **kwargs):
        if self.name.endswith(".tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    metrics_file.write(tmp_path, {**old, "status": "failed"})
    assert metrics_file.read(tmp_path)["status"] == "failed"
    with pytest.raises(OSError):
        metrics_file.write(tmp_path, {**old, "status": "failed", "error": "x" * 20_000})  # past the record's blocks
    assert metrics_file.read(tmp_path)["status"] == "failed"
    assert not list(tmp_path.glob("*.tmp")) and json.loads(metrics_file.path(tmp_path).read_text())


def test_a_full_disk_with_no_intact_checkpoint_promises_none(tmp_path):
    """With no intact checkpoint the way on is the same command again: resume=true would continue nothing."""
    from attnexp.cli.failures import disk_full

    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"PK\x03\x04 cut short")
    said = str(disk_full(tmp_path))
    assert "Removed the checkpoints it cut short: last.ckpt." in said
    assert not (tmp_path / "checkpoints" / "last.ckpt").exists()  # no damaged checkpoint kept
    assert "run the same command again: no checkpoint was whole yet" in said and "resume=true" not in said
