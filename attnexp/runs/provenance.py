"""The code and machine a run ran on: each mixer class's module, file and source hash, attnexp's version (with its
git commit, and whether the checkout had changes, when it runs from one), torch, Lightning, Python and the device."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import inspect
import platform
from pathlib import Path
from typing import Any

from attnexp.runs import checkout

SOURCE_DIGITS = 12  # hex digits of a source hash kept in a record


def source_hash(path: str | Path) -> str | None:
    """The sha256 of a file's bytes (its first :data:`SOURCE_DIGITS` hex digits); None when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:SOURCE_DIGITS]
    except OSError:
        return None


def mixer_sources(net: Any) -> dict[str, dict[str, Any]]:
    """For each mixer class in the network ``net`` (built-in or not: :func:`attnexp.mixers.is_mixer`),
    ``module.Class -> {module, file, sha256}``: the file that defines it and a hash of that file, so a change anywhere
    in it (a helper beside the class, a constant) makes another version."""
    from attnexp.mixers import is_mixer  # torch: only where a network is built

    classes = {type(m) for m in net.modules() if is_mixer(m)}
    found = {}
    for cls in sorted(classes, key=lambda c: (c.__module__, c.__qualname__)):
        try:
            file = inspect.getsourcefile(cls)
        except TypeError:  # defined where Python keeps no file
            file = None
        found[f"{cls.__module__}.{cls.__qualname__}"] = {
            "module": cls.__module__,
            "file": file,
            "sha256": source_hash(file) if file else None,
        }
    return found


def sources_id(mixers: dict[str, dict[str, Any]] | None) -> str:
    """One string for the source versions of a run's mixers (``""`` for a record without them)."""
    return ",".join(f"{name}={entry.get('sha256')}" for name, entry in sorted((mixers or {}).items()))


@functools.lru_cache(maxsize=1)
def software() -> dict[str, Any]:
    """attnexp's version (and, run from a git checkout, its commit and whether the checkout's attnexp/ or configs/
    differ from it: :mod:`attnexp.runs.checkout`), torch, Lightning and Python."""
    import pytorch_lightning
    import torch

    try:
        version = importlib.metadata.version("attnexp")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {
        "attnexp": version,
        **checkout.describe(Path(__file__).resolve().parents[2]),
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
