"""A damaged checkpoint gets one paragraph, never the advice to load it unsafely, and an intact one of the run is
used with a warning or named (finding 5)."""

from __future__ import annotations

import os
import shutil
import signal

from helpers import SLOW, read_metrics, run_cli, run_dirs, start, wait_for_epochs
from test_lm_runs import QUIET, run_predict


def cut_short(path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_predict_falls_back_from_a_damaged_best_checkpoint_and_names_what_is_wrong(cli):
    root, _ = cli("model=dot", "data=corpus", "data.repeats=5", "trainer.max_epochs=2", *QUIET)
    (run,) = run_dirs(root / "outputs")
    (best,) = (run / "checkpoints").glob("epoch*.ckpt")
    cut_short(best)
    proc = run_predict(run, 'prompt="[bos] el perro"', "tokens=1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"warning: The checkpoint {best} is damaged: it ends early" in proc.stderr
    assert (
        f"Predicting with {run / 'checkpoints' / 'last.ckpt'} instead." in proc.stderr and "next token" in proc.stdout
    )

    (run / "checkpoints" / "last.ckpt").write_bytes(os.urandom(4096))  # now no checkpoint of the run is intact
    for choice in ("best", "last"):
        proc = run_predict(run, 'prompt="[bos] el perro"', f"checkpoint={choice}")
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "is damaged" in proc.stderr and "No other checkpoint of that run is intact." in proc.stderr
        assert "weights_only" not in proc.stderr and "Traceback" not in proc.stderr


ARGS = [a for a in SLOW if not a.startswith("trainer.max_epochs=")] + ["trainer.max_epochs=6"]


def interrupted_run(tmp_path):
    """A run stopped by Ctrl-C after its second epoch: last.ckpt and the best checkpoint are there."""
    proc = start(tmp_path, *ARGS)
    wait_for_epochs(tmp_path, proc, 2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    (run,) = run_dirs(tmp_path / "outputs")
    assert read_metrics(run)["status"] == "interrupted"
    return run


def test_resume_over_a_damaged_last_checkpoint_continues_from_the_intact_best(tmp_path):
    run = interrupted_run(tmp_path)
    best = next((run / "checkpoints").glob("epoch*.ckpt"))
    cut_short(run / "checkpoints" / "last.ckpt")
    stray = run / "checkpoints" / "epoch009-best0.9999.ckpt"  # a save a full disk cut short, which no callback knows
    shutil.copy(best, stray)
    cut_short(stray)
    resumed = run_cli(tmp_path, *ARGS, "resume=true")
    assert "This run's checkpoints/last.ckpt is damaged: it ends early" in resumed.stderr, resumed.stderr
    assert f"Continuing from {best.name} instead" in resumed.stderr and "ckpt_path=" not in resumed.stderr
    assert "Removed the run's damaged checkpoints: epoch009-best0.9999.ckpt, last.ckpt." in resumed.stderr
    assert run_dirs(tmp_path / "outputs") == [run]
    assert read_metrics(run)["status"] == "ok" and read_metrics(run)["epochs"] == 6
    assert not stray.exists()  # no damaged checkpoint kept after the resume


def test_resume_with_no_intact_checkpoint_says_so_and_leaves_the_record(tmp_path):
    run = interrupted_run(tmp_path)
    for ckpt in (run / "checkpoints").glob("*.ckpt"):
        cut_short(ckpt)
    refused = run_cli(tmp_path, *ARGS, "resume=true", check=False)
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert "This run's checkpoints/last.ckpt is damaged: it ends early" in refused.stderr
    advice = (
        f"No other checkpoint of that run is intact: to start again, delete the run's folder {run} and run the same"
    )
    assert advice in refused.stderr
    assert "ckpt_path=" not in refused.stderr and "Traceback" not in refused.stderr
    assert read_metrics(run)["status"] == "interrupted"  # the run's record is left as it was
    shutil.rmtree(run)  # the advice, followed, trains the run anew
    assert run_cli(tmp_path, *ARGS, "resume=true").returncode == 0 and read_metrics(run)["status"] == "ok"
