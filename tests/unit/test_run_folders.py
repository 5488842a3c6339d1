"""Run folders and records: single runs named by what their command set, a record left at running by a process that
is gone read as abandoned, and which runs a comparison takes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from attnexp.runs import metrics_file
from attnexp.runs.folders import resumed_folder, run_dirname


def test_a_single_run_is_named_by_its_other_overrides_shortened_as_sweep_jobs_are():
    assert run_dirname("data=mnist,model=euclid,seed=1,trainer.max_epochs=2") == "_seed=1,trainer.max_epochs=2"
    assert run_dirname("data.path=/a/b.txt,model=dot") == "_data.path=_a_b.txt"  # no sub-folder from '/'
    assert run_dirname("model=dot") == run_dirname("") == ""
    long = "+note=" + "x" * 300
    assert run_dirname(long) == run_dirname(long) != run_dirname(long + "y")  # resume=true finds it again
    assert len(run_dirname(long)) == 13 and "x" not in run_dirname(long)


def test_resume_finds_the_sweep_of_the_same_command_whatever_its_hydra_overrides(tmp_path):
    """A sweep's multirun.yaml keeps Hydra's own overrides (launcher, jobs) apart from the task's: the command line's
    are compared without them, and the seeds, as the record's."""
    from omegaconf import OmegaConf

    sweep = tmp_path / "multirun" / "day" / "time"
    sweep.mkdir(parents=True)
    task = ["seed=3,4", "net.dim=16"]
    OmegaConf.save({"hydra": {"overrides": {"hydra": ["hydra/launcher=basic"], "task": task}}}, sweep / "multirun.yaml")
    cfg = OmegaConf.create({"paths": {"log_dir": str(tmp_path)}})
    command = ["hydra/launcher=basic", "hydra.launcher.n_jobs=2", "seed=0,1", "net.dim=16", "resume=true"]
    assert resumed_folder(cfg, command, sweep=True) == str(sweep)
    assert resumed_folder(cfg, ["hydra/launcher=basic", "net.dim=32", "resume=true"], sweep=True) is None


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
