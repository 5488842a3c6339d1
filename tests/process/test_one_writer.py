"""One writer per run: the same command started twice at once, or once the first trains, and the same sweep twice,
train each run once, in one folder with one log, one event file and one last checkpoint; the other start is refused
(a sweep's job skipped), naming the process that trains."""

from __future__ import annotations

import subprocess

from helpers import command, read_metrics, run_cli, run_dirs, start, user_env, wait_for_epochs

RUN = [
    "trainer.max_epochs=4",
    "trainer.deterministic=true",
    "data.batch_size=16",
    "callbacks.progress_bar.refresh_rate=0",
]


def started(cwd, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        command("attnexp", *args), cwd=cwd, env=user_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def one_of_each(folder) -> None:
    """The folder of one run that trained once: event files of one process (``events.out.tfevents.<time>.<host>.<pid>
    .<n>``), one last checkpoint, one log, one start in the record."""
    events = [p.name.split(".")[-2] for p in folder.glob("events.out.tfevents.*")]
    assert len(set(events)) == 1, sorted(p.name for p in folder.iterdir())
    assert sorted(p.name for p in (folder / "checkpoints").glob("last*.ckpt")) == ["last.ckpt"]
    assert len(list(folder.glob("train.log"))) == 1 and not list(folder.glob("*.tmp"))
    record = read_metrics(folder)
    assert record["status"] == "ok" and [s for _, s in record["history"]].count("running") == 1, record["history"]


def test_two_starts_at_once_train_once(tmp_path):
    first, second = started(tmp_path, *RUN), started(tmp_path, *RUN)
    outs = [p.communicate(timeout=600) for p in (first, second)]
    codes = sorted(p.returncode for p in (first, second))
    assert codes == [0, 2], outs
    refusal = next(err for (_, err), p in zip(outs, (first, second)) if p.returncode == 2)
    assert "is being trained by process" in refusal and "Traceback" not in refusal, refusal
    (run,) = run_dirs(tmp_path / "outputs")
    one_of_each(run)
    assert "is being trained by process" not in (run / "train.log").read_text()  # the refused start wrote nothing
    alone = tmp_path / "alone"
    alone.mkdir()
    run_cli(alone, *RUN)
    (reference,) = run_dirs(alone / "outputs")
    metrics = {k: v for k, v in read_metrics(run).items() if k.startswith(("train/", "val/", "test/"))}
    assert metrics == {k: v for k, v in read_metrics(reference).items() if k in metrics}


def test_a_start_while_the_run_trains_is_refused_before_anything_is_written(tmp_path):
    proc = start(tmp_path, *RUN[1:], "trainer.max_epochs=200")
    try:
        wait_for_epochs(tmp_path, proc, 1)
        again = run_cli(tmp_path, *RUN[1:], "trainer.max_epochs=200", check=False)
        resumed = run_cli(tmp_path, *RUN[1:], "trainer.max_epochs=200", "resume=true", check=False)
    finally:
        proc.terminate()
        proc.communicate(timeout=300)
    for proc_ in (again, resumed):
        assert proc_.returncode == 2 and f"is being trained by process {proc.pid}" in proc_.stderr, proc_.stderr
    (run,) = run_dirs(tmp_path / "outputs")
    assert {p.name.split(".")[-2] for p in run.glob("events.out.tfevents.*")} == {str(proc.pid)}


def test_the_same_sweep_twice_at_once_trains_each_job_once(tmp_path):
    """Joblib's workers (the default launcher) and the basic launcher's jobs in the main process race for the same
    two runs: each trains once, whichever launcher gets it."""
    sweep = ["--multirun", "seed=0,1", *RUN]
    first, second = (
        started(tmp_path, *sweep, "hydra/launcher=parallel"),
        started(tmp_path, *sweep, "hydra/launcher=basic"),
    )
    outs = [p.communicate(timeout=900) for p in (first, second)]
    runs = run_dirs(tmp_path / "outputs" / "runs")
    assert len(runs) == 2, (runs, outs)
    for run in runs:
        one_of_each(run)
    said = "".join(out + err for out, err in outs)
    assert "Traceback" not in said and "FileNotFoundError" not in said, said[-3000:]
