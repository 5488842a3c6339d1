"""An interrupted parallel sweep (the default launcher) ends its jobs where they are (reported abandoned, or interrupted
where a job saw the signal first), starts no more, leaves no process behind and says so once, whether SIGINT or SIGTERM
reaches the process group or the main process only, and a second Ctrl-C changes nothing; jobs killed without a word
are reported as abandoned and continued by resume=true."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time

import pytest
from helpers import read_metrics, run_cli, run_dirs, start

from attnexp.runs import metrics_file

# three jobs on two workers: one waits for a free worker when the signal comes
SWEEP = [
    "--multirun",
    "seed=0,1,2",
    "hydra.launcher.n_jobs=2",
    "trainer.max_epochs=500",
    "data.batch_size=16",
    "net.dim=16",
    "callbacks.progress_bar.refresh_rate=0",
]


def wait_for_two_jobs(cwd, proc, timeout: float = 300) -> None:
    """Until two jobs have finished an epoch (and written last.ckpt)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ready = 0
        for run in run_dirs(cwd / "outputs"):
            try:
                ready += read_metrics(run).get("epochs", 0) >= 1 and (run / "checkpoints" / "last.ckpt").exists()
            except (json.JSONDecodeError, FileNotFoundError):
                continue
        if ready >= 2:
            return
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.1)
    raise AssertionError("two jobs did not finish an epoch in time")


def session_processes(proc) -> list[str]:
    """The processes left in the sweep's session (it was started in a session of its own)."""
    listed = subprocess.run(["ps", "-o", "pid=,sess=,args=", "-e"], capture_output=True, text=True).stdout.splitlines()
    return [line for line in listed if line.split()[1] == str(proc.pid)]


@pytest.mark.parametrize(
    ("to", "sig"),
    [  # Ctrl-C in a terminal; kill, as a scheduler sends it; kill -INT twice to a script's job started with &
        ("group", signal.SIGINT),
        ("main", signal.SIGTERM),
        ("main of a script's background job, twice", signal.SIGINT),
    ],
    ids=["group-SIGINT", "main-SIGTERM", "main of a script's background job-SIGINT twice"],
)
def test_a_stopped_sweep_ends_its_jobs_and_leaves_no_process(tmp_path, sig, to):
    """``kill -INT`` reaches a sweep a script started with ``&`` too, which inherits SIGINT ignored: as a single run's
    fit does, the sweep handles the signal itself; a second one while the jobs are being stopped changes nothing."""
    background = "background job" in to
    proc = start(tmp_path, *SWEEP, new_session=True, sigint=signal.SIG_IGN if background else signal.SIG_DFL)
    try:
        wait_for_two_jobs(tmp_path, proc)
        if to == "group":
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
            if to.endswith("twice"):  # a second Ctrl-C while the jobs are being stopped
                time.sleep(0.05)
                proc.send_signal(sig)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out[-3000:]
    deadline = time.time() + 60  # the workers may take a moment to go after the main process ended
    while session_processes(proc) and time.time() < deadline:
        time.sleep(0.2)
    assert not session_processes(proc)
    runs = run_dirs(tmp_path / "outputs")
    assert len(runs) == 2, runs  # the third job did not start
    for run in runs:
        record = read_metrics(run)
        assert metrics_file.current_status(record, run) in ("abandoned", "interrupted"), record
    assert "Traceback" not in out and out.count("Stopped by Ctrl-C or SIGTERM") == 1, out[-3000:]


def test_jobs_killed_without_a_word_are_reported_abandoned_and_resumed(tmp_path):
    """``kill -9`` of the whole sweep (or an out-of-memory killer): the jobs' records stay at running with no process
    behind them; a comparison reports them as abandoned and resume=true finishes them."""
    from attnexp.cli.compare import main as compare

    # 40 epochs of ~0.2 s: neither job can finish while the other is still starting on a busy machine
    args = [a for a in SWEEP if not a.startswith(("seed=", "trainer.max_epochs="))]
    args += ["seed=0,1", "trainer.max_epochs=40"]
    proc = start(tmp_path, *args, new_session=True)
    try:
        wait_for_two_jobs(tmp_path, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    runs = run_dirs(tmp_path / "outputs")
    assert [read_metrics(run)["status"] for run in runs] == ["running", "running"]
    deadline = time.time() + 60  # the killed workers are gone once the kernel has reaped them
    while session_processes(proc) and time.time() < deadline:
        time.sleep(0.2)
    (sweep,) = list((tmp_path / "outputs" / "multirun").glob("*/*"))
    assert compare([str(sweep), "--out", str(tmp_path / "cmp")]) == 1
    (row,) = csv.DictReader((tmp_path / "cmp" / "summary.csv").open())
    assert row["status"] == "seed 0 abandoned; seed 1 abandoned" and row["n"] == "0"
    run_cli(tmp_path, *args, "resume=true")
    assert [read_metrics(run)["status"] for run in runs] == ["ok", "ok"] and run_dirs(tmp_path / "outputs") == runs
