"""Each console script as a process of its own, as a user's shell starts it (the script pip installed, a folder outside
the checkout, no PYTHONPATH): one good command and one bad input each, their exit statuses and what they print. Every
other test of the commands runs them in the test's process (tests/cli)."""

from __future__ import annotations

from helpers import run_dirs, run_process

SMALL = ["trainer.max_epochs=1", "trainer.limit_train_batches=2", "callbacks.progress_bar.refresh_rate=0"]


def test_each_console_script_runs_a_good_command_and_refuses_a_bad_one(tmp_path):
    trained = run_process(tmp_path, "attnexp", "data=corpus", *SMALL)
    assert trained.returncode == 0 and "Run ok in" in trained.stderr, trained.stderr[-2000:]
    (run,) = run_dirs(tmp_path / "outputs")
    good = {
        "attnexp-compare": run_process(tmp_path, "attnexp-compare", str(run), "--out", "cmp"),
        "attnexp-predict": run_process(tmp_path, "attnexp-predict", f"run={run}", "prompt=el", "tokens=2"),
        "attnexp-check": run_process(tmp_path, "attnexp-check", "model=dot", "--no-speed"),
    }
    for name, proc in good.items():
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (name, proc.stderr[-2000:])
    assert "| model=dot |" in good["attnexp-compare"].stdout and (tmp_path / "cmp" / "summary.md").is_file()
    assert "next token" in good["attnexp-predict"].stdout
    assert "checks: all passed" in good["attnexp-check"].stdout

    bad = {
        "attnexp": (["model=softermax"], "Bad input: model=softermax names no option of the config group model"),
        "attnexp-check": (["model=softermax"], "attnexp-check: model=softermax names no option"),
        "attnexp-compare": ([str(tmp_path / "nowhere")], "attnexp-compare: no such folder"),
        "attnexp-predict": ([f"run={tmp_path / 'nowhere'}", "prompt=el"], "attnexp-predict: run="),
    }
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for name, (args, words) in bad.items():
        proc = run_process(tmp_path, name, *args)
        assert proc.returncode == 2 and words in proc.stderr, (name, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, (name, proc.stderr)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written
