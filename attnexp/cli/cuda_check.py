"""Keep torch's CUDA availability check cheap on machines without an NVIDIA driver."""

from __future__ import annotations

import ctypes
import os

import torch


def plain_cuda_check_without_driver() -> bool:
    """Undo Lightning's ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` where there is no NVIDIA driver; True if undone.

    Lightning turns the NVML-based check on so that asking whether CUDA is available never
    initialises CUDA before a fork. torch's Adam asks at every ``step()``, and without a driver
    each NVML check tries to load the missing ``libnvidia-ml`` again: about 0.17 ms a step, a
    tenth of a small model's training step on a CPU. With no driver there is no CUDA to
    initialise, so the plain check is as fork-safe and costs microseconds. ROCm builds are left
    alone: their GPUs run without libnvidia-ml.
    """
    if os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") != "1" or torch.version.hip:
        return False
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        return False
    except OSError:
        os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "0"
        return True
