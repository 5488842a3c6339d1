"""Each console script as a process of its own refusing bad input, as a user's shell starts it (the script pip
installed, a folder outside the checkout, no PYTHONPATH): exit status 2, one paragraph, nothing written. A good command
of each runs as a process in the user's tier (the first of each script in README.md, tests/user); every other test of
the commands runs them in the test's process (tests/cli)."""

from __future__ import annotations

from helpers import run_process

BAD = {
    "attnexp": (["model=softermax"], "Bad input: model=softermax names no option of the config group model"),
    "attnexp-check": (["model=softermax"], "attnexp-check: model=softermax names no option"),
    "attnexp-compare": (["nowhere"], "attnexp-compare: no such folder: nowhere"),
    "attnexp-predict": (["run=nowhere", "prompt=el"], "attnexp-predict: run=nowhere is not a run folder"),
}


def test_each_console_script_refuses_bad_input_with_exit_status_2_and_writes_nothing(tmp_path):
    for name, (args, words) in BAD.items():
        proc = run_process(tmp_path, name, *args)
        assert proc.returncode == 2 and words in proc.stderr, (name, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, (name, proc.stderr)
    assert not list(tmp_path.iterdir())  # nothing written
