"""Sweeps produce named job folders, a correct summary and plots, survive failures and resume."""

from __future__ import annotations

import csv
import signal

import pytest
from helpers import SLOW, read_metrics, run_dirs, start, wait_for_epochs
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from attnexp.cli.train import CONFIG_DIR

QUIET = "callbacks.progress_bar.refresh_rate=0"


def sweep_dir(root):
    """The newest sweep folder under ``root``."""
    return sorted(p for p in (root / "outputs" / "multirun").glob("*/*") if p.is_dir())[-1]


BOOM = """from attnexp.mixers import DotAttention


class Boom(DotAttention):
    def score(self, q, k):
        raise RuntimeError("boom in the score")
"""


def test_a_job_of_bad_input_stops_the_sweep_before_anything_runs(cli):
    root, proc = cli("--multirun", "model.heads=1,3", "trainer.max_epochs=1", QUIET, check=False)
    assert proc.returncode == 2 and "dim=4 is not divisible by heads=3" in proc.stderr
    assert "Traceback" not in proc.stderr and not (root / "outputs" / "multirun").exists()
    assert not run_dirs(root / "outputs")


def test_a_failing_job_is_recorded_and_the_others_run(cli, tmp_path):
    (tmp_path / "configs" / "model").mkdir(parents=True)
    (tmp_path / "boom.py").write_text(BOOM)
    (tmp_path / "configs" / "model" / "boom.yaml").write_text("_target_: boom.Boom\n_partial_: true\n")
    root, proc = cli("--multirun", "model=dot,boom", "trainer.max_epochs=1", QUIET, check=False)
    assert proc.returncode == 1
    sweep = sweep_dir(root)
    status = {p.relative_to(sweep).as_posix(): read_metrics(p)["status"] for p in run_dirs(sweep)}
    assert status == {"model=dot": "ok", "model=boom": "failed"}  # the fixed overrides are not in the names
    assert "boom in the score" in read_metrics(sweep / "model=boom")["error"]
    assert "Traceback" in (sweep / "model=boom" / "train.log").read_text()
    assert "1 of 2 jobs did not finish" in proc.stderr


def test_sweep_without_test_finishes_and_plateau_waits_for_validation(cli):
    """test=false: a job is done when fit ends. Validating every other epoch: the plateau schedule skips the others."""
    root, _proc = cli(
        "--multirun",
        "model=dot,se",
        "test=false",
        "module/scheduler=plateau",
        "trainer.max_epochs=2",
        "trainer.check_val_every_n_epoch=2",
        "paths.log_dir=outputs",
        QUIET,
    )
    sweep = sweep_dir(root)
    assert not any("paths.log_dir" in p.name for p in run_dirs(sweep))  # the root is not part of a job's name
    records = [read_metrics(p) for p in run_dirs(sweep)]
    assert len(records) == 2 and all(r["status"] == "ok" and "test/acc" not in r and r["epochs"] == 2 for r in records)
    rows = {r["config"]: r for r in csv.DictReader((sweep / "summary.csv").open())}
    assert {row["status"] for row in rows.values()} == {"ok"} and all(
        float(row["val/acc_best mean"]) > 0 for row in rows.values()
    )


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


def test_ddp_on_cpu_gives_one_run(cli):
    root, proc = cli("trainer=ddp", "trainer.accelerator=cpu", "trainer.max_epochs=1", QUIET)
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

    from helpers import run_cli

    args = ["--multirun", "model=dot,euclid", "trainer.max_epochs=2", "trainer.deterministic=true", QUIET]
    parallel, sequential = tmp_path / "parallel", tmp_path / "sequential"
    parallel.mkdir(), sequential.mkdir()
    every_core = {"OMP_NUM_THREADS": str(len(os.sched_getaffinity(0)))}
    run_cli(parallel, *args, env=every_core)  # the default launcher: joblib, one job per core, its share of threads
    run_cli(sequential, *args, "hydra/launcher=basic", env=every_core)  # one after the other, the default threads
    for job in ("model=dot", "model=euclid"):
        a, b = (read_metrics(sweep_dir(root) / job) for root in (parallel, sequential))
        assert a["status"] == b["status"] == "ok"
        assert {k: a[k] for k in ("train/loss", "val/loss", "test/acc")} == {
            k: b[k] for k in ("train/loss", "val/loss", "test/acc")
        }
    assert (sweep_dir(parallel) / "summary.csv").exists()


def test_optuna_search_optimises_the_returned_metric(cli):
    root, proc = cli("--multirun", "hparams_search=optuna", "hydra.sweeper.n_trials=2", "trainer.max_epochs=1", QUIET)
    best = max(read_metrics(p)["val/acc_best"] for p in run_dirs(root / "outputs"))
    assert f"Best value: {best}" in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "launcher,target", [("slurm", "SlurmLauncher"), ("parallel", "JoblibLauncher"), ("basic", "BasicLauncher")]
)
def test_launcher_configs_compose(launcher, target):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=[f"hydra/launcher={launcher}"], return_hydra_config=True)
        default = compose("train", return_hydra_config=True)
    assert cfg.hydra.launcher._target_.endswith(target) and default.hydra.launcher._target_.endswith("JoblibLauncher")
    if launcher == "slurm":
        assert cfg.hydra.launcher.timeout_min == 240 and cfg.hydra.launcher.gpus_per_node == 1


def test_curves_come_from_the_csv_logger_without_tensorboard(tmp_path):
    from pytorch_lightning.loggers import CSVLogger

    from attnexp.comparison.plots import val_curve

    logger = CSVLogger(save_dir=tmp_path, name="", version="")  # as configs/logger/csv.yaml writes it
    for epoch, acc in [(0, 0.5), (0, 0.6), (1, 0.7)]:  # per-epoch metrics have the epoch as their step
        logger.log_metrics({"val/acc": acc}, step=epoch)
        logger.log_metrics({"train/loss": 1.0}, step=epoch)  # rows without val/acc are skipped
    logger.save()
    assert val_curve(tmp_path, "val/acc") == [(0, 0.6), (1, 0.7)]


def test_overrides_too_long_for_a_folder_name_get_a_short_one(cli):
    root, proc = cli(
        "--multirun",
        f"+note={'x' * 300},{'y' * 300}",
        "trainer.max_epochs=1",
        "trainer.limit_train_batches=2",
        QUIET,
        check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-2000:]
    sweep = sweep_dir(root)
    names = sorted(p.relative_to(sweep).as_posix() for p in run_dirs(sweep))
    assert names == ["job0", "job1"], names
    assert (sweep / "summary.md").read_text().count(" | 1/1 | ") == 2  # two configurations, a run each


def test_job_link_names_follow_the_varying_keys():
    from attnexp.cli.report import job_dirname

    assert job_dirname("data.path=/a/b.txt,seed=0", 3) == "data.path=_a_b.txt/seed=0"  # a level per key, not per '/'
    assert job_dirname("data=x,model=dot,seed=1", 0) == "model=dot/data=x/seed=1"  # the variant first
    assert job_dirname("note=" + "x" * 300, 3) == "job3" and job_dirname("", 0) == "job0"


def test_compare_names_a_missing_folder(tmp_path, capsys):
    from attnexp.cli.compare import main

    assert main([str(tmp_path / "nowhere")]) == 2
    assert f"no such folder: {tmp_path / 'nowhere'}" in capsys.readouterr().err
    assert main([str(tmp_path)]) == 2 and "no runs to compare" in capsys.readouterr().err  # a folder without runs


def test_jobs_that_would_share_a_folder_are_refused_before_anything_runs(cli):
    """``seed=0,0`` would train two jobs into one folder (finding 2)."""
    root, proc = cli("--multirun", "model=dot", "seed=0,1,0", QUIET, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert (
        "These jobs would run the same settings, code, data and seed into one folder: model=dot seed=0" in proc.stderr
    )
    assert "Nothing was run" in proc.stderr and "Traceback" not in proc.stderr
    assert not list((root / "outputs").rglob("multirun.yaml")) and not run_dirs(root / "outputs")


@pytest.mark.parametrize(
    "override,words",
    [
        ("hydra.launcher.n_jobs=0", ["hydra.launcher.n_jobs=0 is not allowed", "positive integer"]),
        (
            "hydra/launcher=slurm",
            ["hydra/launcher=slurm submits each job to a SLURM cluster with sbatch", "hydra/launcher=basic"],
        ),
    ],
)
def test_launcher_settings_that_cannot_work_stop_before_a_sweep_folder_is_made(cli, override, words):
    """Finding 6: one paragraph and exit status 2, no traceback, no empty sweep folder (no sbatch on the PATH here)."""
    root, proc = cli("--multirun", "model=dot,euclid", override, QUIET, check=False, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr[-2000:]
    for word in words:
        assert word in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not [p for p in (root / "outputs" / "multirun").glob("*/*") if p.is_dir()]


def test_submitit_leaves_no_stray_folder(cli):
    """Finding 10: submitit's files go to .submitit/ without an empty folder named %j beside them."""
    root, _ = cli(
        "--multirun",
        "hydra/launcher=submitit_local",
        "model=dot",
        "trainer.max_epochs=1",
        "trainer.limit_train_batches=2",
        QUIET,
    )
    sweep = sweep_dir(root)
    assert read_metrics(sweep / "job0")["status"] == "ok"
    assert list((sweep / ".submitit").glob("*_0_log.out")) and not list(sweep.rglob("%j"))
