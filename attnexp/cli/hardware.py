"""What this machine offers a run: the cores a process may use, how sweep jobs share them or a GPU, and a cheap CUDA
check where no NVIDIA driver is loaded. No torch import at module level: used while composing."""

from __future__ import annotations

import glob
import os

GPU_JOBS = 8  # jobs at once on one NVIDIA GPU: a small model's job leaves it idle between steps, others fill it
DRIVER_FILES = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia[0-9]*")  # where a loaded NVIDIA driver shows


def passive_waiting() -> None:
    """OpenMP's threads sleep when they wait, unless the user's environment says otherwise: two threads beside a busy
    process do not spin against it (docs/speed.md). Read once, when torch loads: set before."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def cores() -> int:
    """CPU cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def sweep_jobs() -> int:
    """Resolver ``attnexp.sweep_jobs``: one job per core without a GPU; with NVIDIA GPUs, up to ``GPU_JOBS`` jobs
    sharing the first (small models there are bound by each step's host work, not by the device)."""
    return min(cores(), GPU_JOBS) if glob.glob("/dev/nvidia[0-9]*") else cores()


def threads_per_job(n_jobs: int) -> int:
    """The cores shared out between ``n_jobs`` jobs running at once, at least one thread each."""
    return max(1, cores() // max(1, n_jobs))


def nvidia_driver() -> bool:
    """Whether an NVIDIA driver is loaded on this machine (its /proc entry or device files exist)."""
    return any(glob.glob(pattern) for pattern in DRIVER_FILES)


def plain_cuda_check_without_driver() -> bool:
    """Undo Lightning's ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` where there is no NVIDIA driver; True if undone.

    Lightning turns the NVML check on so that asking for CUDA never initialises it before a fork; torch's Adam asks at
    every ``step()``, and without a driver each NVML check tries to load the missing ``libnvidia-ml`` again (about
    0.17 ms a step, a tenth of a small model's CPU step). With no driver the plain check is as fork-safe. ROCm builds
    are left alone: their GPUs run without libnvidia-ml.
    """
    import torch

    if os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") != "1" or torch.version.hip or nvidia_driver():
        return False
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "0"
    return True
