"""What a process is the subject of when a run stops: kill -9 and resume, SIGINT and SIGTERM, an address-space limit,
a full disk."""

from __future__ import annotations

import signal
import time

import pytest
import torch
from helpers import SLOW, read_metrics, run_cli, run_dirs, start, wait_for_epochs

FINAL = ("test/acc", "test/loss", "val/acc_best", "val/acc", "val/loss", "train/loss", "train/acc")


def test_kill9_then_resume_equals_uninterrupted_run(tmp_path):
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    whole.mkdir(), broken.mkdir()
    run_cli(whole, *SLOW)
    proc = start(broken, *SLOW)
    wait_for_epochs(broken, proc, 1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (run,) = run_dirs(broken / "outputs")
    assert read_metrics(run)["status"] == "running"
    run_cli(broken, *SLOW, "resume=true")
    assert run_dirs(broken / "outputs") == [run]  # continued in the same folder
    expected, resumed = read_metrics(run_dirs(whole / "outputs")[0]), read_metrics(run)
    assert resumed["status"] == "ok"
    assert {k: resumed[k] for k in FINAL} == {k: expected[k] for k in FINAL}
    assert resumed["seconds_per_epoch"] * 2 == pytest.approx(
        resumed["fit_s"], abs=0.01
    )  # the 2 epochs left after epoch 1
    # a finished run is skipped when resumed again
    mtime = (run / "metrics.json").stat().st_mtime
    run_cli(broken, *SLOW, "resume=true")
    assert (run / "metrics.json").stat().st_mtime == mtime


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_saves_checkpoint_and_marks_interrupted(tmp_path, sig):
    proc = start(tmp_path, *SLOW, "trainer.max_epochs=200")
    wait_for_epochs(tmp_path, proc, 1)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    (run,) = run_dirs(tmp_path / "outputs")
    assert proc.returncode == 130, out[-2000:]
    assert read_metrics(run)["status"] == "interrupted"
    assert (run / "checkpoints" / "interrupted.ckpt").exists() and (run / "checkpoints" / "last.ckpt").exists()
    assert "Traceback" not in out and "Run interrupted: stopped by Ctrl-C or SIGTERM" in out


def test_out_of_memory_names_the_model_size_the_batch_and_what_to_lower(tmp_path):
    """Finding 6: the allocator's refusal becomes one paragraph (here under a 4 GiB address-space limit)."""
    import re
    import resource
    import subprocess

    from helpers import command, compose_cfg, user_env
    from hydra.utils import instantiate

    from attnexp.cli.build import network as build_net

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))

    overrides = ["net.dim=16384", "callbacks.progress_bar.refresh_rate=0"]
    proc = subprocess.run(
        command("attnexp", *overrides),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=limit,
        env=user_env(),
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    message = next(line for line in proc.stderr.splitlines() if line.startswith("Run failed: Out of memory"))
    assert "Traceback" not in proc.stderr and "on the CPU (main memory): an allocation of" in message
    cfg = compose_cfg(overrides, tmp_path)
    with torch.device("meta"):
        params = sum(p.numel() for p in build_net(cfg.net, instantiate(cfg.data).spec).parameters())
    assert re.search(r"The model has ([\d,]+) parameters", message)[1] == f"{params:,}"
    assert "trains on batches of 64" in message and "Lower data.batch_size" in message and "net.dim" in message
    (run,) = run_dirs(tmp_path / "outputs")
    assert read_metrics(run)["status"] == "failed" and read_metrics(run)["error"].startswith("Out of memory")


def test_a_full_disk_ends_in_one_paragraph_a_failed_record_and_no_temporary_file(tmp_path):
    """The run writes into a small tmpfs (mounted in a mount namespace of the test's own) until a checkpoint finds no
    space: one paragraph naming the folder, the space to make and the checkpoint cut short; the record says
    failed; no temporary file is left; resume=true then continues from the newest intact checkpoint."""
    import shutil
    import subprocess

    from helpers import command, read_metrics, run_cli

    if shutil.which("unshare") is None:
        pytest.skip("no unshare: a tmpfs needs a mount namespace")
    args = ["net.depth=2", "net.dim=64", "net.prenorm=true", "trainer.max_epochs=4"]
    attnexp = " ".join(command("attnexp", *args, "callbacks.progress_bar.refresh_rate=0", "paths.log_dir=mnt/out"))
    script = f"""
mkdir -p mnt && mount -t tmpfs -o size=1500k tmpfs mnt || exit 77
{attnexp} > out.txt 2> err.txt; echo $? > code
cp -r mnt/out copy
"""
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    if done.returncode == 77:
        pytest.skip(f"a tmpfs cannot be mounted here: {done.stderr.strip()}")
    said = (tmp_path / "err.txt").read_text()
    assert (tmp_path / "code").read_text().strip() == "1", said
    (run,) = {p.parent for p in (tmp_path / "copy").rglob("metrics.json")}
    record = read_metrics(run)
    assert record["status"] == "failed" and record["error"].startswith("No space left on the disk of"), record
    paragraph = next(line for line in said.splitlines() if line.startswith("Run failed"))
    assert "MiB at least" in paragraph and "resume=true" in paragraph and "Traceback" not in said, said
    damaged = paragraph.split("Removed the checkpoints it cut short: ")[1].split(".ckpt.")[0].split(", ")
    kept = sorted(p.name for p in (run / "checkpoints").glob("*.ckpt"))
    assert kept and not {f"{name.removesuffix('.ckpt')}.ckpt" for name in damaged} & set(kept), (damaged, kept)
    assert not list(run.rglob("*.tmp")), sorted(p.name for p in run.rglob("*"))
    for ckpt in kept:  # no damaged checkpoint kept
        torch.load(run / "checkpoints" / ckpt, map_location="cpu", weights_only=False)
    resumed = run_cli(tmp_path, *args, "callbacks.progress_bar.refresh_rate=0", "paths.log_dir=copy", "resume=true")
    assert "Resuming from" in resumed.stderr and read_metrics(run)["status"] == "ok", resumed.stderr[-2000:]


@pytest.mark.parametrize("free_kib", [0, 32], ids=["no room at all", "room for the first record alone"])
def test_a_disk_full_at_the_start_says_so_cleanly_in_the_record_or_on_the_console(tmp_path, free_kib):
    """A disk that fills as the run starts: exit status 1 and one paragraph naming the folder, no traceback, no
    damaged checkpoint and no temporary file. With room for the run's first record (written before anything else),
    the record says the disk was full; with none, the paragraph says the record could not be written and nothing of
    this start is left (no empty lock file, train.log or folder). The same command runs once there is room."""
    import shutil
    import subprocess

    from helpers import command

    if shutil.which("unshare") is None:
        pytest.skip("no unshare: a tmpfs needs a mount namespace")
    args = ["trainer.max_epochs=1", "trainer.limit_train_batches=2", "callbacks.progress_bar.refresh_rate=0"]
    attnexp = " ".join(command("attnexp", *args, "paths.log_dir=mnt/out"))
    script = f"""
mkdir -p mnt && mount -t tmpfs -o size={64 + free_kib}k tmpfs mnt || exit 77
dd if=/dev/zero of=mnt/fill bs=1k count=1000 2>/dev/null; rm mnt/fill; dd if=/dev/zero of=mnt/fill bs=1k count=64
{attnexp} > out.txt 2> err.txt; echo $? > code
rm mnt/fill && cp -r mnt/out copy
"""
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], cwd=tmp_path, capture_output=True, text=True)
    if done.returncode == 77:
        pytest.skip(f"a tmpfs cannot be mounted here: {done.stderr.strip()}")
    said = (tmp_path / "err.txt").read_text()
    assert (tmp_path / "code").read_text().strip() == "1", said
    assert "Traceback" not in said and "Error executing job" not in said and "Logging error" not in said, said
    paragraph = next(line for line in said.splitlines() if line.startswith("Run failed"))
    assert "No space left on the disk of mnt/out/runs/" in paragraph and "run the same command again" in paragraph
    files = [p for p in (tmp_path / "copy").rglob("*") if p.is_file()]
    assert not [p for p in files if p.suffix in (".tmp", ".ckpt")], files  # no damaged checkpoint, no temporary file
    if free_kib:
        (run,) = run_dirs(tmp_path / "copy")
        record = read_metrics(run)
        assert record["status"] == "failed" and record["error"].startswith("No space left on the disk of"), record
    else:
        assert "no room for the run's record either" in paragraph and not files, (paragraph, files)
    shutil.rmtree(tmp_path / "copy")
    run_cli(tmp_path, *args, "paths.log_dir=copy")  # room now: the same command runs
    (run,) = run_dirs(tmp_path / "copy")
    assert read_metrics(run)["status"] == "ok"


def test_resume_continues_from_a_checkpoint_folder_of_ones_own(tmp_path):
    """``callbacks.checkpoint.dirpath`` elsewhere (it cannot change a number, so it is the same run): killed after its
    first epoch, resume=true continues from the last checkpoint there, with the uninterrupted run's numbers."""
    elsewhere = tmp_path / "elsewhere"
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    whole.mkdir(), broken.mkdir()
    run_cli(whole, *SLOW)
    proc = start(broken, *SLOW, f"callbacks.checkpoint.dirpath={elsewhere}")
    deadline = time.time() + 300
    while not (elsewhere / "last.ckpt").exists() and time.time() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (run,) = run_dirs(broken / "outputs")
    assert not (run / "checkpoints").exists() and read_metrics(run)["checkpoints"] == str(elsewhere)
    resumed = run_cli(broken, *SLOW, f"callbacks.checkpoint.dirpath={elsewhere}", "resume=true")
    record = read_metrics(run)
    assert record["resumed"][-1]["from"] == str(elsewhere / "last.ckpt"), resumed.stderr[-2000:]
    expected = read_metrics(run_dirs(whole / "outputs")[0])
    assert {k: record[k] for k in FINAL} == {k: expected[k] for k in FINAL}
