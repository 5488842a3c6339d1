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

import torch
from torch import Tensor

_workspaces = threading.local()
_kept: dict[tuple[int, str], list[Tensor]] = {}  # score-sized memory of finished calls, by size, ready for the next


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
        if memory is None or memory.numel() < numel:
            memory, views = torch.empty(numel, dtype=torch.float32), {}
            slots[slot] = memory, views
        view = views[shape, dtype] = memory[:numel].view(dtype).view(shape)
    return view


def kept_memory(ctx: object, shape: tuple[int, ...], like: Tensor) -> Tensor | None:
    """Memory for a value kept from the forward pass to the backward pass, to write into (``out=``): memory a finished
    call kept, handed on when that call's autograd node ``ctx`` is gone, so never while its graph can still run
    backward (a second backward after another forward included). None off a CPU and in a compiled graph."""
    if like.device.type != "cpu" or torch.compiler.is_compiling():
        return None
    numel = math.prod(shape)
    free = _kept.setdefault((numel, like.device.type), [])
    memory = free.pop() if free else torch.empty(numel, dtype=torch.float32)
    weakref.finalize(ctx, free.append, memory)
    return memory.view(shape)
