"""Every refusal that would leave the user stuck names the way out, and the way out, followed, works."""

from __future__ import annotations

import shutil
import sys
import warnings

from helpers import FAST, read_metrics, run_dirs


def listing(root):
    return sorted((p.relative_to(root).as_posix(), p.stat().st_size) for p in root.rglob("*") if p.is_file())


def test_a_cut_short_record_names_the_folder_to_delete_and_deleting_it_trains_the_run_again(cli):
    root, _ = cli(*FAST)
    (run,) = run_dirs(root / "outputs")
    record = run / "metrics.json"
    record.write_text(record.read_text()[:100])
    before = listing(root)
    for extra in ([], ["resume=true"]):
        _, proc = cli(*FAST, *extra, check=False)
        assert proc.returncode == 2, proc.stderr[-2000:]
        shown = run.relative_to(root).as_posix()
        assert f"{shown}/metrics.json is damaged" in proc.stderr and "no record can be read" in proc.stderr
        assert f"Restore the file from a copy, or delete the run's folder (rm -r {shown})" in proc.stderr
        assert listing(root) == before  # nothing written
    shutil.rmtree(run)  # the way out, followed
    cli(*FAST)
    assert read_metrics(run)["status"] == "ok"


def test_a_checkpoint_of_another_network_in_a_folder_without_record_is_refused_with_the_way_out(cli):
    """Copied into the folder: resume=true refused it only after "Run folder:", writing a record that then asked for
    resume=true again."""
    root, _ = cli(*FAST)
    cli(*FAST, "model=mlp")
    (run,) = [r for r in run_dirs(root / "outputs") if r.parent.name.startswith("dot_")]
    (other,) = [r for r in run_dirs(root / "outputs") if r.parent.name.startswith("mlp_")]
    (run / "metrics.json").unlink()
    for ckpt in (run / "checkpoints").glob("*.ckpt"):
        ckpt.unlink()
    shutil.copy(other / "checkpoints" / "last.ckpt", run / "checkpoints" / "last.ckpt")
    shown = run.relative_to(root).as_posix()
    before = listing(root)
    _, fresh = cli(*FAST, check=False)
    assert fresh.returncode == 2 and f"{shown} holds checkpoints but no record" in fresh.stderr, fresh.stderr
    _, resumed = cli(*FAST, "resume=true", check=False)
    assert resumed.returncode == 2, resumed.stderr[-2000:]
    assert f"{shown}/checkpoints/last.ckpt was written by a different mixer or network" in resumed.stderr
    assert f"delete the run's folder (rm -r {shown}) to train this run anew" in resumed.stderr
    assert "Run folder" not in resumed.stderr and "add resume=true" not in resumed.stderr
    assert listing(root) == before  # nothing written: no record that would ask for resume=true again
    shutil.rmtree(run)  # the way out, followed
    cli(*FAST)
    assert read_metrics(run)["status"] == "ok"


def test_a_sweep_with_a_cut_short_record_names_the_job_and_its_way_out_and_runs_once_it_is_followed(cli):
    """A sweep starts whole or not at all (its comparison holds every job it lists): the refusal names each job whose
    record is damaged, the file and the way out, and the jobs that are whole."""
    root, _ = cli("--multirun", "seed=0,1", "hydra/launcher=basic", *FAST)
    damaged = next(run for run in run_dirs(root / "outputs/runs") if run.name == "seed=1")
    record = damaged / "metrics.json"
    record.write_text(record.read_text()[:100])
    before = listing(root)
    _, proc = cli("--multirun", "seed=0,1,2", "hydra/launcher=basic", *FAST, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    shown = damaged.relative_to(root).as_posix()
    said = " ".join(proc.stderr.split())
    assert f"The sweep's job seed=1: {shown}/metrics.json is damaged" in said, said
    assert f"delete the run's folder (rm -r {shown})" in said and "leaving seed=1 out" in said, said
    assert "(seed=0, seed=2 are whole)" in said and "Nothing was run or written." in said, said
    assert "Traceback" not in proc.stderr and listing(root) == before  # nothing written
    _, proc = cli("--multirun", "seed=0,2", "hydra/launcher=basic", *FAST)  # the way out, the other jobs now
    assert read_metrics(damaged.parent / "seed=2")["status"] == "ok"


def test_hydras_warnings_are_said_once_in_a_paragraph_not_printed_raw(cli, monkeypatch):
    """A warning Hydra gives once the run is under way (here: ``--multirun`` over ``hydra.mode=RUN``) is said once,
    in one paragraph, with neither its source line nor its category."""

    def as_a_process_shows_it(message, category, filename, lineno, file=None, line=None):  # not pytest's record
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    monkeypatch.setattr(warnings, "showwarning", as_a_process_shows_it)
    _, proc = cli("--multirun", "hydra.mode=RUN", "seed=1", "hydra/launcher=basic", *FAST)
    said = proc.stderr
    line = "Hydra warns: Running Hydra app with --multirun, overriding with `hydra.mode=MULTIRUN`."
    assert said.count(line) == 1, said[-3000:]
    assert "UserWarning" not in said and "warnings.warn(" not in said and "hydra/_internal" not in said, said[-3000:]
