"""One writer per run folder: the lock is the process's for as long as it lives, refused to a second process with its
number, and gone with the process however it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from attnexp.runs import lock

HOLD = (
    "import sys, time; from attnexp.runs import lock; lock.take(sys.argv[1]); print('held', flush=True); time.sleep(60)"
)


def holding(folder) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_held_lock_is_refused_with_the_process_and_released_by_kill_9(tmp_path):
    proc = holding(tmp_path / "run")
    try:
        assert lock.holder(tmp_path / "run") == proc.pid
        with pytest.raises(lock.Busy) as busy:
            lock.take(tmp_path / "run")
        assert busy.value.pid == proc.pid and f"process {proc.pid}" in str(busy.value)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    deadline = time.time() + 30
    while lock.holder(tmp_path / "run") is not None and time.time() < deadline:
        time.sleep(0.05)
    assert lock.holder(tmp_path / "run") is None  # no stale lock


def test_this_process_holds_its_own_lock_once_and_sees_no_other_holder(tmp_path):
    """Under its own lock a start reads the folder's record as no other process trains there (a record left at
    running by a killed process is abandoned)."""
    lock.take(tmp_path / "mine")
    lock.take(tmp_path / "mine")  # again: still this process's, no deadlock
    assert lock.holder(tmp_path / "mine") is None and lock.holder(tmp_path / "none") is None
    other = "import sys\nfrom attnexp.runs import lock\ntry:\n    lock.take(sys.argv[1])\n"
    other += "except lock.Busy as busy:\n    print(busy.pid)"
    said = subprocess.run([sys.executable, "-c", other, str(tmp_path / "mine")], capture_output=True, text=True)
    assert said.stdout.strip() == str(os.getpid()), said.stderr  # another process is refused, told who holds it
