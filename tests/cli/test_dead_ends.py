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
