"""How many sweep jobs run at once, and how many torch threads each gets (no torch import: used while composing)."""

from __future__ import annotations

import glob
import os


def cores() -> int:
    """CPU cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


GPU_JOBS = 8  # jobs at once on one NVIDIA GPU: a small model's job leaves it idle between steps, others fill it


def sweep_jobs() -> int:
    """Resolver ``attnexp.sweep_jobs``: one job per core without a GPU; with NVIDIA GPUs, up to ``GPU_JOBS`` jobs
    sharing the first (small models there are bound by each step's host work, not by the device)."""
    return min(cores(), GPU_JOBS) if glob.glob("/dev/nvidia[0-9]*") else cores()


def threads_per_job(n_jobs: int) -> int:
    """The cores shared out between ``n_jobs`` jobs running at once, at least one thread each."""
    return max(1, cores() // max(1, n_jobs))
