"""Where euclid's score-sized values live on a CPU: memory kept between calls, never fresh blocks.

A fresh block of a megabyte costs the process page faults (the allocator hands large freed blocks back to the
system), about as long as the attention's arithmetic on it: 0.5 ms a call at 64 x 64 x 64 scores on the machines
measured. Values used inside one forward or backward call take the thread's :func:`workspace`; values kept from the
forward pass to the backward pass take memory a finished call gave back (:func:`kept_memory`). On a GPU (whose
allocator caches) and in a compiled graph (whose memory the compiler plans) both give None: the operation makes its
own.
"""

from __future__ import annotations

import math
import threading
import weakref
from pathlib import Path

import torch
from torch import Tensor

_workspaces = threading.local()
_kept: dict[int, list[Tensor]] = {}  # score-sized memory of finished calls, by size, ready for the next


def workspace(slot: int, shape: tuple[int, ...], like: Tensor, dtype: torch.dtype = torch.float32) -> Tensor | None:
    """Memory of ``shape`` for a value used only inside one forward or backward call, to write into (``out=``): each
    ``slot`` is memory the thread keeps between calls (float32 words; int32 views share them), handed out as the same
    view while the shape stays. None off a CPU and in a compiled or exported graph."""
    if like.device.type != "cpu" or torch.compiler.is_compiling():
        return None
    slots = getattr(_workspaces, "slots", None)
    if slots is None:
        slots = _workspaces.slots = {}
    memory, views = slots.get(slot, (None, {}))
    view = views.get((shape, dtype))
    if view is None:
        numel = math.prod(shape)
        with torch.inference_mode(False):  # memory made in inference mode could not be written outside it later
            if memory is None or memory.numel() < numel:
                memory, views = torch.empty(numel, dtype=torch.float32), {}
                slots[slot] = memory, views
            view = views[shape, dtype] = memory[:numel].view(dtype).view(shape)
    return view


def core_cache_bytes(default: int = 1 << 20) -> int:
    """The cache a core keeps to itself (its L2, as Linux's sysfs gives it), or ``default`` where it cannot be read."""
    try:
        for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
            if (index / "level").read_text().strip() == "2" and (index / "type").read_text().strip() != "Instruction":
                size = (index / "size").read_text().strip().upper()
                return int(size.rstrip("KMG")) << {"K": 10, "M": 20, "G": 30}.get(size[-1:], 0)
    except (OSError, ValueError):
        pass
    return default


STEP = 32  # floats one step of torch's vectorised CPU loop takes (two AVX-512 vectors, four AVX2 ones)
GRAIN = 32768  # elements below which an elementwise operation runs on one thread (torch's grain size)


def whole_steps(numel: int) -> int:
    """``numel`` rounded up so that each thread's share of an elementwise operation over it is whole steps of torch's
    vectorised loop: no element goes through the loop's scalar remainder, whose ``exp2`` rounds differently from the
    vectorised one, so an element's result does not depend on where in the tensor it lies (nor on the other rows
    of the batch)."""
    size = -(-numel // STEP) * STEP
    while True:
        threads = max(1, min(torch.get_num_threads(), -(-size // GRAIN)))
        rounded = -(-size // (STEP * threads)) * STEP * threads
        if rounded == size:
            return size
        size = rounded


def tile_memory(slot: int, shape: tuple[int, ...], like: Tensor) -> tuple[Tensor, Tensor]:
    """Score-sized memory of ``shape`` for one tile: the view to write into and the whole-steps flat view over it
    (:func:`whole_steps`) to run ``exp2`` and the like on, memory the thread keeps between calls (handed out as the
    same views while the shape and the thread count stay), or new memory off a CPU and in a compiled graph."""
    numel = math.prod(shape)
    if like.device.type != "cpu" or torch.compiler.is_compiling():
        flat = torch.empty(whole_steps(numel), dtype=torch.float32, device=like.device)
        return flat[:numel].view(shape), flat
    tiles = getattr(_workspaces, "tiles", None)
    if tiles is None:
        tiles = _workspaces.tiles = {}
    memory, views = tiles.get(slot, (None, {}))
    key = shape, torch.get_num_threads()
    found = views.get(key)
    if found is None:
        size = whole_steps(numel)
        if memory is None or memory.numel() < size:
            memory, views = torch.empty(size, dtype=torch.float32), {}
            tiles[slot] = memory, views
        found = views[key] = memory[:numel].view(shape), memory[:size]
    return found


def kept_memory(ctx: object, like: Tensor, *shapes: tuple[int, ...]) -> list[Tensor | None]:
    """Memory for values kept from the forward pass to the backward pass, one per shape, to write into (``out=``):
    memory finished calls kept, handed on when this call's autograd node ``ctx`` is gone, so never while its graph can
    still run backward (a second backward after another forward included). Nones off a CPU and in a compiled graph."""
    if like.device.type != "cpu" or torch.compiler.is_compiling():
        return [None] * len(shapes)
    taken = []
    for shape in shapes:
        free = _kept.setdefault(math.prod(shape), [])
        taken.append((free, free.pop() if free else torch.empty(math.prod(shape), dtype=torch.float32)))
    weakref.finalize(ctx, hand_back, taken)
    return [memory.view(shape) for (_, memory), shape in zip(taken, shapes)]


def hand_back(taken: list[tuple[list[Tensor], Tensor]]) -> None:
    for free, memory in taken:
        free.append(memory)
