"""Which process of a data-parallel run this is, read from the variables its launcher sets (torchrun's, SLURM's,
Lightning's own), before torch is imported: the run's one writer is global rank 0 on whatever node it lies; every other
rank writes nothing of its own, prints only its errors, and ends when the process that started it is gone."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping

# A process's rank in each launcher's words: torchrun (RANK: global), Lightning's launcher (LOCAL_RANK on the node,
# NODE_RANK the node), srun (SLURM_PROCID: global), LSF's jsrun; any of them set above 0 makes a rank that only trains.
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")
LAUNCHED = ("RANK", "LOCAL_RANK")  # set in a process that torchrun or Lightning's launcher started
LAUNCHER = "ATTNEXP_LAUNCHER_PID"  # the first process of a run: the parent of the ranks Lightning starts from it
PARENT_POLL_S = 1.0
ORPHANED_STATUS = 143  # as a process that SIGTERM ended


def is_global_zero(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process is global rank 0 of its run (a run of one process is): every rank variable set says 0."""
    env = os.environ if environ is None else environ
    return all(_as_rank(env.get(key)) == 0 for key in RANK_VARIABLES)


def _as_rank(value: str | None) -> int:
    """A rank variable's value; unset or not a number: 0 (the launcher's own check refuses the latter)."""
    try:
        return int(value) if value else 0
    except ValueError:
        return 0


def follow_launcher() -> threading.Thread | None:
    """In a rank that torchrun or Lightning's launcher started: end this process once its launcher is gone (killed
    with -9, Lightning's rank 0 among them), even before it joined the others, so that no rank waits for ever; None
    elsewhere, where this process is named as the launcher of the ranks Lightning will start from it."""
    if not any(key in os.environ for key in LAUNCHED):
        os.environ[LAUNCHER] = str(os.getpid())
        return None
    parent = int(os.environ.get(LAUNCHER) or os.getppid())

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(ORPHANED_STATUS)  # its launcher is gone: the run it was part of has ended

    thread = threading.Thread(target=watch, name="attnexp-follow-launcher", daemon=True)
    thread.start()
    return thread
