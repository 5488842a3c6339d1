"""Which line of a mixer's code computed a value: every torch call of a forward pass recorded with the frames it ran in
(a ``TorchFunctionMode``), so that a wrong value found after the fact (a shape, weights that break their kind, a
first NaN, a leak of a later token) is named at the user's line, not at the class or at attnexp's checks.

Run only where something was found wrong: the call is made again under :class:`Trace` (it keeps every tensor of the
pass). The line named is the innermost frame of the user's code (outside torch, the standard library, installed
packages and attnexp) inside the mixer's call; where the value was computed in attnexp's own code (the softmax of
scores a user's ``score`` returned), the value is followed back through the calls that made it to the user's line.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from attnexp.mixers.frames import Origin, in_library, in_package, origin
from attnexp.mixers.request import is_mixer

# Calls that only move, copy or cast their input's values: a value they return was computed before them.
CARRIERS = frozenset(
    {
        "pad", "reshape", "view", "view_as", "flatten", "unflatten", "__getitem__", "narrow", "select", "to", "float",
        "double", "half", "bfloat16", "type", "type_as", "contiguous", "clone", "detach", "transpose", "permute",
        "movedim", "swapaxes", "t", "expand", "expand_as", "squeeze", "unsqueeze", "split", "chunk", "unbind",
        "repeat", "tile",
    }
)  # fmt: skip


class Call(NamedTuple):
    """One torch call: the frames it ran in (outermost first, libraries left out), its tensor inputs and outputs."""

    frames: list[tuple[FrameType, int]]  # (frame, line) as traceback.walk_tb gives them
    inputs: list[Tensor]
    outputs: list[Tensor]
    nonfinite: bool  # a NaN or infinity in its outputs where its inputs had none
    name: str = ""  # the torch function's name (``pad``, ``matmul``, ``__getitem__``)

    @property
    def carries(self) -> bool:
        """Whether the call only moves, copies or casts values (:data:`CARRIERS`): it computes nothing."""
        return self.name in CARRIERS


class Trace(TorchFunctionMode):
    """Records every torch call made while it is active (``with Trace() as trace: mixer(x)``)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []
        self.made: dict[int, list[int]] = {}  # id of a tensor -> the calls that returned it (tensors are kept)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        outputs = [t for t in tree_leaves(out) if isinstance(t, Tensor)]
        if outputs:
            given = tree_leaves((args, kwargs))
            inputs = [t for t in given if isinstance(t, Tensor)]
            name = str(getattr(func, "__name__", ""))
            call = Call(frames(), inputs, outputs, made_nonfinite(given, outputs), name)
            for t in outputs:
                self.made.setdefault(id(t), []).append(len(self.calls))
            self.calls.append(call)
        return out

    def in_mixer(self, mixer: nn.Module | None = None) -> Iterator[tuple[int, Call]]:
        """The calls made inside ``mixer``'s methods (any mixer's when None), in order."""
        for i, call in enumerate(self.calls):
            if any(belongs(owner(f), mixer) for f, _ in call.frames):
                yield i, call

    def first_nonfinite(self, mixer: nn.Module | None = None, nan: bool = False) -> Origin | None:
        """Where the first NaN or infinity was made from finite inputs inside ``mixer`` (any mixer when None); with
        ``nan`` the first NaN made from inputs that are all finite and not near overflow (0/0, the root of a negative
        number), not an overflow, which parameters grown by too high a learning rate make too."""
        made = (call for _, call in self.in_mixer(mixer) if call.nonfinite and (not nan or made_nan(call)))
        return next((located(call, mixer) for call in made), None)

    def computed(self, value: Tensor, mixer: nn.Module, numbers: bool = False) -> Origin | None:
        """The user's line inside ``mixer`` that computed ``value``: the call that returned it, else (a call of
        attnexp's own) the calls that made its inputs, followed back until one ran in the user's code. ``numbers``:
        the numbers are wrong, not the layout, so a call that only carries them (a cast, a reshape) is followed back
        too."""
        todo, seen = list(reversed(self.made.get(id(value), []))), set()
        fallback = None
        while todo:
            i = todo.pop(0)
            if i in seen:
                continue
            seen.add(i)
            found = located(self.calls[i], mixer)  # None for a call outside the mixer (a copy of its output)
            if found is not None and not in_package(Path(found.file)) and not (numbers and self.calls[i].carries):
                return found
            fallback = fallback or found
            todo += [j for t in self.calls[i].inputs for j in reversed(self.made.get(id(t), [])) if j < i]
        return fallback


def traced(run: Callable[[], Any]) -> tuple[Trace, Any]:
    """``run()`` under a new :class:`Trace`, without gradients; an error it raises ends the trace there."""
    trace = Trace()
    result = None
    try:
        with torch.no_grad(), trace:
            result = run()
    except Exception:
        pass
    return trace, result


def first_differing(
    mixer: nn.Module,
    runs: tuple[Callable[[], Any], ...],
    part: Callable[[Tensor], Tensor | None],
    tol: float = 1e-5,
) -> Origin | None:
    """Where, inside ``mixer``, a value first differs between two runs in its ``part`` (the share that must not
    change; None: a value with no such share to tell): the line of the first call whose part moved while the parts of
    its inputs did not, the line that brings the change in. None where that cannot be told: the first moved part comes
    from inputs whose part cannot be told (a value in another layout: chunks, a step's state)."""
    first, second = (dict(traced(run)[0].in_mixer(mixer)) for run in runs)
    for i, call in first.items():
        other = second.get(i)
        if other is None or len(other.outputs) != len(call.outputs):
            continue
        if not any(moved(a, b, part, tol) for a, b in zip(call.outputs, other.outputs)):
            continue
        pairs = list(zip(call.inputs, other.inputs)) if len(call.inputs) == len(other.inputs) else []
        for a, b in pairs:
            changed = a.shape == b.shape and a.is_floating_point() and not torch.equal(a, b)
            if changed and (part(a) is None or moved(a, b, part, tol)):
                return None  # it came in before, where it cannot be told
        return located(call, mixer)
    return None


def moved(a: Tensor, b: Tensor, part: Callable[[Tensor], Tensor | None], tol: float) -> bool:
    """Whether ``part`` of two values of one call differs by more than ``tol`` (relative); NaN where the other holds
    a number counts."""
    if a.shape != b.shape or not a.is_floating_point():
        return False
    pa, pb = part(a), part(b)
    if pa is None or pb is None or pa.numel() == 0:
        return False
    pa, pb = pa.detach().float(), pb.detach().float()
    same = (pa == pb) | (pa.isnan() & pb.isnan())
    if bool(same.all()):
        return False
    diff = (pa - pb).abs().nan_to_num(math.inf, math.inf, math.inf)
    return float(diff.max()) > tol * (1.0 + float(pb.abs().nan_to_num(0.0, 0.0, 0.0).max()))


def computed_at(
    mixer: nn.Module, rerun: Callable[[], Any] | None, nonfinite: bool = False, numbers: bool = False
) -> str:
    """`` (computed at file:line, in method)``: where ``mixer``'s code computed the value ``rerun()`` returns again
    (the wrong one a check found; ``numbers``: its numbers, not its shape, past the casts and reshapes that carry
    them), or with ``nonfinite`` where it first made a NaN or infinity; ``""`` where that cannot be told."""
    if rerun is None:
        return ""
    trace, value = traced(rerun)
    found = trace.first_nonfinite(mixer) if nonfinite else None
    if not nonfinite and isinstance(value, Tensor):
        found = trace.computed(value, mixer, numbers)
    if found is None:
        return ""
    what = "its first NaN or infinity made" if nonfinite else "computed"
    return f" ({what} at {found.file}:{found.line}, in {found.function})"


def located(call: Call, mixer: nn.Module | None) -> Origin | None:
    """The call's line: its frames from the mixer's first method inward, the user's innermost preferred."""
    start = next((i for i, (f, _) in enumerate(call.frames) if belongs(owner(f), mixer)), None)
    if start is None:
        return None
    name = type(owner(call.frames[start][0])).__name__
    return origin(call.frames[start:], name)


def frames() -> list[tuple[FrameType, int]]:
    """The frames of the running call outside torch and the standard library, outermost first."""
    found: list[tuple[FrameType, int]] = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if not in_library(Path(frame.f_code.co_filename)) and frame.f_code.co_filename != __file__:
            found.append((frame, frame.f_lineno))
        frame = frame.f_back
    return found[::-1]


def belongs(owned: object, mixer: nn.Module | None) -> bool:
    """Whether a frame's object is ``mixer`` (any mixer when None)."""
    return owned is mixer if mixer is not None else is_mixer(owned)


def owner(frame: Any) -> object:
    return frame.f_locals.get("self")


def made_nonfinite(given: list[Any], outputs: list[Tensor]) -> bool:
    """Whether a call made a NaN where none of its arguments held one, or an infinity where none held a NaN or an
    infinity (masking with float("-inf") makes one on purpose; filling with float("nan") is the bug itself)."""
    nan_in, inf_in = (any(holds(v, kind) for v in given) for kind in ("nan", "inf"))
    nan_out, inf_out = (any(holds(t, kind) for t in outputs) for kind in ("nan", "inf"))
    return (nan_out and not nan_in) or (inf_out and not inf_in and not nan_in)


def made_nan(call: Call) -> bool:
    """Whether a call returned a NaN where every tensor it was given was finite and of a size whose products fit its
    precision (at most the square root of its largest number): a NaN from values that large is an overflow."""
    floats = [t for t in call.inputs if t.is_floating_point()]
    fit = all(t.numel() == 0 or float(t.abs().max()) <= torch.finfo(t.dtype).max ** 0.5 for t in floats)
    return fit and any(holds(t, "nan") for t in call.outputs)


def holds(value: Any, kind: str) -> bool:
    """Whether an argument (a tensor, or a number) holds a NaN (``kind`` nan) or an infinity (inf); a number NaN
    counts as none (it is what a call is given to make one)."""
    if isinstance(value, float):
        return kind == "inf" and math.isinf(value)
    if not isinstance(value, Tensor) or not (value.is_floating_point() or value.is_complex()):
        return False
    return bool((value.isnan() if kind == "nan" else value.isinf()).any())
