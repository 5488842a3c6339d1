"""Sweeps produce named job folders, a correct summary and plots, survive failures and resume."""

from __future__ import annotations

import csv

import pytest
from helpers import output_captured, read_metrics, run_cli, run_dirs
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from attnexp.cli.train import CONFIG_DIR

QUIET = "callbacks.progress_bar.refresh_rate=0"
SEQUENTIAL = "hydra/launcher=basic"  # a sweep's jobs one after the other, in the test's process: they are the subject


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
    root, proc = cli("--multirun", "model=dot,boom", "trainer.max_epochs=1", QUIET, SEQUENTIAL, check=False)
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
        SEQUENTIAL,
    )
    sweep = sweep_dir(root)
    assert not any("paths.log_dir" in p.name for p in run_dirs(sweep))  # the root is not part of a job's name
    records = [read_metrics(p) for p in run_dirs(sweep)]
    assert len(records) == 2 and all(r["status"] == "ok" and "test/acc" not in r and r["epochs"] == 2 for r in records)
    rows = {r["config"]: r for r in csv.DictReader((sweep / "summary.csv").open())}
    assert {row["status"] for row in rows.values()} == {"ok"} and all(
        float(row["val/acc_best mean"]) > 0 for row in rows.values()
    )


def test_optuna_search_optimises_the_returned_metric(cli):
    root, proc = cli(
        "--multirun", "hparams_search=optuna", "hydra.sweeper.n_trials=2", "trainer.max_epochs=1", QUIET, SEQUENTIAL
    )
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
        SEQUENTIAL,
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
    """Finding 6: one paragraph and exit status 2, no traceback, no empty sweep folder (no sbatch on this PATH)."""
    root, proc = cli("--multirun", "model=dot,euclid", override, QUIET, check=False, env={"PATH": "/nowhere"})
    assert proc.returncode == 2, proc.stderr[-2000:]
    for word in words:
        assert word in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not [p for p in (root / "outputs" / "multirun").glob("*/*") if p.is_dir()]


def test_a_sweep_whose_folder_holds_the_same_configuration_and_seed_twice_ends_as_attnexp_compare_would(
    cli, monkeypatch
):
    """An earlier run of the same configuration and seed in the sweep's folder (``hydra.sweep.dir`` given again, with
    another ``paths.log_dir``): the summary's refusal, as attnexp-compare gives it, not a crash; the jobs are kept."""
    short = ["trainer.max_epochs=1", "trainer.limit_train_batches=2", "trainer.limit_val_batches=2", QUIET]
    root, _ = cli("seed=0", "paths.log_dir=first", *short)
    (earlier,) = run_dirs(root / "first")
    (root / "sweep").mkdir()
    (root / "sweep" / "earlier").symlink_to(earlier)
    _, proc = cli(
        "--multirun", "seed=0,1", "paths.log_dir=second", "hydra.sweep.dir=sweep", *short, SEQUENTIAL, check=False
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    from attnexp.cli.compare import main

    monkeypatch.chdir(root)
    with output_captured() as said:
        assert main(["sweep", "--out", "cmp"]) == 2
    refusal = said[1].split("attnexp-compare: ", 1)[1].strip()
    assert refusal.startswith("the same configuration and seed finished more than once (model=dot seed 0 in ")
    assert "sweep/earlier and sweep/seed=0" in refusal
    last = proc.stderr.strip().splitlines()[-1]  # the sweep ends with the same paragraph, and how to summarise it
    assert last.endswith(f"No summary of sweep: {refusal} Then attnexp-compare sweep writes it."), proc.stderr[-3000:]
    assert "raised ValueError" not in proc.stderr and "default baseline" not in proc.stderr
    assert not (root / "sweep" / "summary.md").exists()
    assert {read_metrics(p)["status"] for p in run_dirs(root / "second")} == {"ok"}


def test_parallel_sweep_by_default_gives_the_numbers_of_a_sequential_one(tmp_path):
    """Each job computes what it would alone: side by side on a share of the cores, or one after the other with the
    threads torch may use (the thread rule gives these small steps one thread either way)."""
    import os

    args = ["--multirun", "model=dot,euclid", "trainer.max_epochs=2", "trainer.deterministic=true", QUIET]
    parallel, sequential = tmp_path / "parallel", tmp_path / "sequential"
    parallel.mkdir(), sequential.mkdir()
    every_core = {"OMP_NUM_THREADS": str(len(os.sched_getaffinity(0)))}
    run_cli(parallel, *args, env=every_core)  # the default launcher: joblib's workers, one job per core, its share
    run_cli(sequential, *args, SEQUENTIAL)  # one after the other, in this process
    for job in ("model=dot", "model=euclid"):
        a, b = (read_metrics(sweep_dir(root) / job) for root in (parallel, sequential))
        assert a["status"] == b["status"] == "ok"
        assert {k: a[k] for k in ("train/loss", "val/loss", "test/acc")} == {
            k: b[k] for k in ("train/loss", "val/loss", "test/acc")
        }
    assert (sweep_dir(parallel) / "summary.csv").exists()
