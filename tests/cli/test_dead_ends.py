"""Every refusal that would leave the user stuck names the way out, and the way out, followed, works."""

from __future__ import annotations

import shutil

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
