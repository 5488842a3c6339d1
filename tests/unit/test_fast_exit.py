"""Console scripts exit without the interpreter's teardown, keeping their status, output, threads and exit handlers."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import atexit, logging, sys, threading, time
    from attnexp.cli.fast_exit import run_then_exit

    logging.basicConfig(filename=sys.argv[1] + "/run.log", level=logging.INFO)
    atexit.register(lambda: open(sys.argv[1] + "/handler", "w").write("ran"))

    def late_write():
        time.sleep(0.5)
        open(sys.argv[1] + "/thread", "w").write("joined")

    def main():
        threading.Thread(target=late_write).start()  # still running when main returns
        logging.info("logged")
        sys.stdout.write("printed, not flushed")
        if sys.argv[2] != "none":
            raise SystemExit(int(sys.argv[2]) if sys.argv[2].isdigit() else sys.argv[2])

    run_then_exit(main)
    print("never reached")
    """
)


@pytest.mark.parametrize(("outcome", "status"), [("none", 0), ("0", 0), ("2", 2), ("a message", 1)])
def test_status_output_logs_threads_and_exit_handlers_survive_the_quick_exit(tmp_path, outcome, status):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), outcome], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == status
    assert proc.stdout == "printed, not flushed"
    assert proc.stderr == ("a message\n" if outcome == "a message" else "")
    assert "logged" in (tmp_path / "run.log").read_text()
    assert (tmp_path / "handler").read_text() == "ran" and (tmp_path / "thread").read_text() == "joined"
