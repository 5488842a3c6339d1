"""Keep torch's CUDA availability check cheap on machines without an NVIDIA driver."""

from __future__ import annotations

import glob
import os

import torch

DRIVER_FILES = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia[0-9]*")  # where a loaded NVIDIA driver shows


def nvidia_driver() -> bool:
    """Whether an NVIDIA driver is loaded on this machine (its /proc entry or device files exist)."""
    return any(glob.glob(pattern) for pattern in DRIVER_FILES)


def plain_cuda_check_without_driver() -> bool:
    """Undo Lightning's ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` where there is no NVIDIA driver; True if undone.

    Lightning turns the NVML-based check on so that asking whether CUDA is available never
    initialises CUDA before a fork. torch's Adam asks at every ``step()``, and without a driver
    each NVML check tries to load the missing ``libnvidia-ml`` again: about 0.17 ms a step, a
    tenth of a small model's training step on a CPU. With no driver there is no CUDA to
    initialise, so the plain check is as fork-safe and costs microseconds. ROCm builds are left
    alone: their GPUs run without libnvidia-ml.
    """
    if os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") != "1" or torch.version.hip or nvidia_driver():
        return False
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "0"
    return True
