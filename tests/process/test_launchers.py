"""Sweeps where processes are the subject: jobs in joblib's workers give a sequential sweep's numbers, DDP ranks give
one run, submitit's launcher, a sweep killed with -9 and resumed."""

from __future__ import annotations

import csv
import signal

import pytest
from helpers import SLOW, read_metrics, run_cli, run_dirs, run_process, start, wait_for_epochs

QUIET = "callbacks.progress_bar.refresh_rate=0"


def sweep_dir(root):
    """The newest sweep folder under ``root``."""
    return sorted(p for p in (root / "outputs" / "multirun").glob("*/*") if p.is_dir())[-1]


def test_resume_skips_finished_jobs_and_finishes_the_interrupted_one(tmp_path):
    from helpers import run_cli

    args = [
        "--multirun",
        "hydra/launcher=basic",
        "seed=3,4",
        *[a for a in SLOW if not a.startswith("seed=")],
    ]  # one job at a time
    proc = start(tmp_path, *args)
    first = None
    while first is None:  # wait until job 0 finished and job 1 has a checkpoint
        wait_for_epochs(tmp_path, proc, 1)
        done = [p for p in run_dirs(tmp_path / "outputs") if read_metrics(p)["status"] == "ok"]
        if done and len(run_dirs(tmp_path / "outputs")) == 2:
            other = next(p for p in run_dirs(tmp_path / "outputs") if p not in done)
            if (other / "checkpoints" / "last.ckpt").exists():
                first = done[0]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    interrupted = next(p for p in run_dirs(tmp_path / "outputs") if p != first)
    assert read_metrics(interrupted)["status"] == "running"
    finished_mtime = (first / "metrics.json").stat().st_mtime
    run_cli(tmp_path, *args, "resume=true")
    assert run_dirs(tmp_path / "outputs") == sorted([first, interrupted])
    assert (first / "metrics.json").stat().st_mtime == finished_mtime  # skipped
    assert read_metrics(interrupted)["status"] == "ok"
    rows = list(csv.DictReader((sweep_dir(tmp_path) / "summary.csv").open()))
    assert len(rows) == 1 and rows[0]["n"] == "2" and rows[0]["table"] == "all"  # the skipped job is compared too


def test_ddp_on_cpu_gives_one_run(tmp_path):
    root, proc = (
        tmp_path,
        run_process(tmp_path, "attnexp", "trainer=ddp", "trainer.accelerator=cpu", "trainer.max_epochs=1", QUIET),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = run_dirs(root / "outputs")
    record = read_metrics(run)
    assert record["status"] == "ok"
    # the batch of one optimizer step: each of the 2 ranks trains on its own batch (finding 10)
    assert (record["batch_size"], record["effective_batch_size"]) == (64, 128)
    assert "batches of 64 per device, 128 per optimizer step" in proc.stderr
    # both ranks' samples: the digits training split (1797 - 360 test - 180 val), one share per rank
    assert record["train_samples_per_s"] * record["fit_s"] == pytest.approx(1257 // 2 * 2, rel=0.01)
    assert len(list((root / "outputs").rglob("train.log"))) == 1


def test_parallel_sweep_by_default_gives_the_numbers_of_a_sequential_one(tmp_path):
    """Each job computes what it would alone: side by side on a share of the cores, or one after the other with the
    threads torch may use (the thread rule gives these small steps one thread either way)."""
    import os

    args = ["--multirun", "model=dot,euclid", "trainer.max_epochs=2", "trainer.deterministic=true", QUIET]
    parallel, sequential = tmp_path / "parallel", tmp_path / "sequential"
    parallel.mkdir(), sequential.mkdir()
    every_core = {"OMP_NUM_THREADS": str(len(os.sched_getaffinity(0)))}
    # the default launcher: joblib's workers, one job per core, its share of threads
    proc = run_process(parallel, "attnexp", *args, env=every_core)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_cli(sequential, *args, "hydra/launcher=basic")  # one after the other, in this process
    for job in ("model=dot", "model=euclid"):
        a, b = (read_metrics(sweep_dir(root) / job) for root in (parallel, sequential))
        assert a["status"] == b["status"] == "ok"
        assert {k: a[k] for k in ("train/loss", "val/loss", "test/acc")} == {
            k: b[k] for k in ("train/loss", "val/loss", "test/acc")
        }
    assert (sweep_dir(parallel) / "summary.csv").exists()


def test_submitit_leaves_no_stray_folder(tmp_path):
    """Finding 10: submitit's files go to .submitit/ without an empty folder named %j beside them."""
    root = tmp_path
    proc = run_process(
        tmp_path,
        "attnexp",
        "--multirun",
        "hydra/launcher=submitit_local",
        "model=dot",
        "trainer.max_epochs=1",
        "trainer.limit_train_batches=2",
        QUIET,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = sweep_dir(root)
    assert read_metrics(sweep / "job0")["status"] == "ok"
    assert list((sweep / ".submitit").glob("*_0_log.out")) and not list(sweep.rglob("%j"))
