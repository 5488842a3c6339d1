"""What this machine offers a run: the cores a process may use, how sweep jobs share them or a GPU, and a cheap CUDA
check where no NVIDIA driver is loaded. No torch import at module level: used while composing."""

from __future__ import annotations

import glob
import os
from typing import Any

GPU_JOBS = 8  # jobs at once on one NVIDIA GPU: a small model's job leaves it idle between steps, others fill it
CPU = ("cpu", "auto")  # the accelerators that can mean CPU processes
DRIVER_FILES = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia[0-9]*")  # where a loaded NVIDIA driver shows


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


def check_devices(cfg: Any) -> None:
    """More training processes on the CPU than this process has cores is refused unless the command names the CPU
    (``trainer.accelerator=cpu`` or ``trainer=cpu``): each process would get less than a core, every step waits for
    the slowest, and the run is slower than one process. GPUs the machine lacks Lightning's Trainer refuses itself."""
    from omegaconf import OmegaConf

    from attnexp.cli.typos import NOTHING
    from attnexp.errors import AttnexpError

    devices = OmegaConf.select(cfg, "trainer.devices", default=1)
    accelerator = str(OmegaConf.select(cfg, "trainer.accelerator", default="auto"))
    if isinstance(devices, bool) or not isinstance(devices, int) or devices <= cores() or accelerator not in CPU:
        return
    given = [str(o) for o in list(OmegaConf.to_container(cfg.hydra.overrides.task) or [])]  # as typed, unresolved
    if any(o.lstrip("+") in ("trainer=cpu", "trainer.accelerator=cpu") for o in given) or on_gpu(accelerator):
        return
    raise AttnexpError(
        f"trainer.devices={devices} starts {devices} training processes on the CPU, which has {cores()} "
        f"core{'s' if cores() > 1 else ''} for this command: each would get less than a core and wait for the "
        f"others at every step, slower than one process. Use trainer.devices={cores()} or fewer, or name the CPU to "
        f"start them anyway (to try data-parallel training): trainer.accelerator=cpu trainer.devices={devices}. "
        f"{NOTHING}"
    )


def on_gpu(accelerator: str) -> bool:
    """Whether Lightning's ``accelerator`` (``auto`` or ``cpu``) trains on a GPU here."""
    import torch

    return accelerator == "auto" and torch.cuda.is_available()
