"""Folders another process trains in, or that cannot be written: found before anything is written, or, where another
process starts a run between the pre-flight stage and the job, said at the sweep's end with the jobs it skipped."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest
from helpers import FAST, run_dirs

from attnexp.cli import preflight
from attnexp.runs.folders import run_folder

OTHER = 424242  # the process number the other writer's lock file gives


def hold(folder: Path):
    """The lock of ``folder`` held as another process holds it (its own open file, its own process number)."""
    folder.mkdir(parents=True, exist_ok=True)
    file = open(folder / ".lock", "a+")  # noqa: SIM115 (closed by the test)
    fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    file.truncate(0)
    file.write(f"{OTHER}\n")
    file.flush()
    return file


def test_a_sweep_says_which_jobs_it_skipped_for_another_process(cli, monkeypatch):
    """The other process takes the jobs' folders after the pre-flight stage looked: each job is skipped, and the
    sweep's end names them and exits with status 1."""
    held = []
    check_folders = preflight.check_folders

    def then_another_process_starts(jobs, *args):
        check_folders(jobs, *args)
        held.extend(hold(Path(run_folder(_root_=cfg))) for cfg in jobs if cfg.seed == 1)

    monkeypatch.setattr(preflight, "check_folders", then_another_process_starts)
    try:
        root, proc = cli("--multirun", "seed=0,1", "hydra/launcher=basic", *FAST, check=False)
    finally:
        for file in held:
            file.close()
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert f"1 job of the sweep was skipped, another process training its run: seed=1 (process {OTHER})" in proc.stderr
    assert "Run the same sweep again once that process ends" in proc.stderr
    (run,) = run_dirs(root / "outputs")  # seed=0 ran
    assert run.name == "seed=0"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a folder without write permission")
def test_a_read_only_runs_folder_under_a_writable_root_is_refused(cli, tmp_path):
    (tmp_path / "outputs" / "runs").mkdir(parents=True)
    (tmp_path / "outputs" / "runs").chmod(0o555)
    try:
        _root, proc = cli(*FAST, check=False)
    finally:
        (tmp_path / "outputs" / "runs").chmod(0o755)
    assert proc.returncode == 2 and "Cannot write run output under outputs/runs/dot_digits_" in proc.stderr
    assert list((tmp_path / "outputs" / "runs").iterdir()) == []


def test_a_runs_folder_that_is_a_file_is_refused_before_anything_is_written(cli, tmp_path):
    """What a read-only folder does for a user who is not root: the run's own folder cannot be made under a root that
    can be written."""
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "runs").write_text("not a folder")
    _root, proc = cli(*FAST, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Cannot write run output under outputs/runs/dot_digits_" in proc.stderr
    assert "(outputs/runs: Not a directory)" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["outputs", "runs"]
