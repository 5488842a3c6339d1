"""The software and machine a run ran on: attnexp's version (with the git commit HEAD names, from a checkout), torch,
Lightning and Python, and the device. Which code ran, file by file, is the run's identity
(:mod:`attnexp.runs.identity`), so a checkout's uncommitted changes are seen there, exactly."""

from __future__ import annotations

import functools
import importlib.metadata
import platform
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parents[2]


def commit(checkout: Path = CHECKOUT) -> str | None:
    """The commit HEAD names in a git checkout (a worktree's ``.git`` file followed), read from git's files."""
    git = checkout / ".git"
    try:
        if git.is_file():
            git = (checkout / git.read_text().split(":", 1)[1].strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        ref = head.split(":", 1)[1].strip() if head.startswith("ref:") else None
        common = git / (git / "commondir").read_text().strip() if (git / "commondir").is_file() else git
        found = [(f / ref).read_text().strip() for f in (git, common) if ref and (f / ref).is_file()]
        packed = (common / "packed-refs").read_text().splitlines() if (common / "packed-refs").is_file() else []
        found += [line.split()[0] for line in packed if ref and line.endswith(f" {ref}")]
        return found[0] if ref and found else (None if ref else head or None)
    except (OSError, IndexError):
        return None


@functools.lru_cache(maxsize=1)
def software() -> dict[str, Any]:
    import pytorch_lightning
    import torch

    try:
        version = importlib.metadata.version("attnexp")
    except importlib.metadata.PackageNotFoundError:
        version = None
    versions = {"torch": str(torch.__version__), "lightning": str(pytorch_lightning.__version__)}
    return {"attnexp": version, "commit": commit(), **versions, "python": platform.python_version()}


def processor() -> str:
    """The CPU's model name (``/proc/cpuinfo`` where there is one)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def device(root_device: Any, devices: int = 1) -> dict[str, Any]:
    """The device a run trained on: its type, its name (the GPU's, else the CPU's model), how many, torch's threads."""
    import torch

    kind = str(getattr(root_device, "type", root_device))
    name = torch.cuda.get_device_name(root_device) if kind == "cuda" else processor()
    return {"type": kind, "name": name, "count": devices, "threads": torch.get_num_threads()}
