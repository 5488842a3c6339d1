"""Sweeps where processes are the subject: jobs in joblib's workers give a sequential sweep's numbers, DDP ranks give
one run, submitit's launcher, a sweep killed with -9 and resumed."""

from __future__ import annotations

import contextlib
import csv
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import SLOW, command, read_metrics, run_cli, run_dirs, run_process, start, user_env, wait_for_epochs

QUIET = "callbacks.progress_bar.refresh_rate=0"


def sweep_dir(root):
    """The newest sweep folder under ``root``."""
    return sorted(p for p in (root / "outputs" / "multirun").glob("*/*") if p.is_dir())[-1]


def test_resume_skips_finished_jobs_and_finishes_the_interrupted_one(tmp_path):

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


def test_ddp_on_cpu_gives_one_run_said_once_and_two_nodes_give_its_numbers(tmp_path):
    """Two ranks on one node, then one rank on each of two nodes (torchrun on the loopback interface, one command per
    node, as a cluster starts them): each run has one record, one log and one writer, its lines said once, and the
    same numbers (the same global batch)."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    proc = run_process(one, "attnexp", "trainer=ddp", "trainer.accelerator=cpu", "trainer.max_epochs=1", QUIET)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = run_dirs(one / "outputs")
    record = read_metrics(run)
    assert record["status"] == "ok"
    # the batch of one optimizer step: each of the 2 ranks trains on its own batch (finding 10)
    assert (record["batch_size"], record["effective_batch_size"]) == (64, 128)
    assert "batches of 64 per device, 128 per optimizer step" in proc.stderr
    # both ranks' samples: the digits training split (1797 - 360 test - 180 val), one share per rank
    assert record["train_samples_per_s"] * record["fit_s"] == pytest.approx(1257 // 2 * 2, rel=0.01)
    for line in ("Run folder:", "Training dot", "epoch 1/1:", "Run ok"):  # rank 1 prints nothing but its errors
        assert proc.stderr.count(line) == 1, proc.stderr
    assert sorted(p.name for p in run.iterdir() if p.suffix == ".log") == ["train.log"]

    port = free_port()
    nodes = [
        subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node-rank={rank}", "--nproc-per-node=1",
             "--master-addr=127.0.0.1", f"--master-port={port}", "--no-python",
             *command("attnexp", "trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=1", "trainer.num_nodes=2",
                      "trainer.max_epochs=1", QUIET)],
            cwd=two, env=user_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for rank in (0, 1)
    ]  # fmt: skip
    said = [node.communicate(timeout=600) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], said
    assert "Run ok" in said[0][1] and "Run" not in said[1][1] and "Bad input" not in said[1][1], said
    (both,) = run_dirs(two / "outputs")
    other = read_metrics(both)
    assert other["status"] == "ok" and other["effective_batch_size"] == 128
    assert sorted(p.name for p in both.iterdir() if p.suffix == ".log") == ["train.log"]
    for key in ("train/loss", "val/acc", "test/acc", "test/loss"):
        assert other[key] == pytest.approx(record[key], rel=1e-5), key


def test_killing_the_main_process_ends_every_rank(tmp_path):
    """Killed as soon as it started its other rank, before that rank could join it (where it would wait for half an
    hour), or while both train: the other rank ends too."""
    proc = start(tmp_path, "trainer=ddp", "trainer.accelerator=cpu", *SLOW)
    ranks: list[int] = []
    while not ranks and proc.poll() is None:
        ranks = children(proc.pid)
        time.sleep(0.05)
    assert ranks, proc.stdout.read() if proc.stdout else "no rank besides the main process"
    proc.kill()
    proc.wait()
    deadline = time.time() + 60
    while time.time() < deadline and any(alive(pid) for pid in ranks):
        time.sleep(0.2)
    left = [pid for pid in ranks if alive(pid)]
    for pid in left:  # not to outlive the test
        os.kill(pid, signal.SIGKILL)
    assert not left


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to read its status has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
