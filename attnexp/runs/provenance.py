"""The software and machine a run ran on: attnexp's version (with the git commit HEAD names, when it runs from a
checkout), torch, Lightning and Python, and the device. Which code ran, file by file, is the run's identity
(:mod:`attnexp.runs.identity`), so a checkout's uncommitted changes are seen there, exactly."""

from __future__ import annotations

import functools
import importlib.metadata
import platform
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parents[2]


def commit(checkout: Path = CHECKOUT) -> str | None:
    """The commit HEAD names in a git checkout (a worktree's ``.git`` file followed), read from git's files: the
    package starts no programs."""
    git = checkout / ".git"
    if git.is_file() and git.read_text().startswith("gitdir:"):
        git = (checkout / git.read_text().split(":", 1)[1].strip()).resolve()
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head.split(":", 1)[1].strip()
        common = git / (git / "commondir").read_text().strip() if (git / "commondir").is_file() else git
        for folder in (git, common):
            if (folder / ref).is_file():
                return (folder / ref).read_text().strip()
        packed = (common / "packed-refs").read_text().splitlines() if (common / "packed-refs").is_file() else []
        return next((line.split()[0] for line in packed if line.endswith(f" {ref}")), None)
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def software() -> dict[str, Any]:
    """attnexp's version and commit (None outside a checkout), torch, Lightning and Python."""
    import pytorch_lightning
    import torch

    try:
        version = importlib.metadata.version("attnexp")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {
        "attnexp": version,
        "commit": commit(),
        "torch": str(torch.__version__),
        "lightning": str(pytorch_lightning.__version__),
        "python": platform.python_version(),
    }


def processor() -> str:
    """The CPU's model name (``/proc/cpuinfo`` where there is one)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device(root_device: Any, devices: int = 1) -> dict[str, Any]:
    """The device a run trained on: its type, its name (the GPU's, else the CPU's model), how many, torch's threads."""
    import torch

    kind = str(getattr(root_device, "type", root_device))
    name = torch.cuda.get_device_name(root_device) if kind == "cuda" else processor()
    return {"type": kind, "name": name, "count": devices, "threads": torch.get_num_threads()}
