"""Euclid's kernels compiled for a GPU on a machine without one: what proves they build (Triton's interpreter never
reaches the code generator) and what their cost is read from (scripts/bench_kernel_static.py).

:func:`launches` builds the operator's own launches (:func:`~.launches.forward_plan`, :func:`~.launches.backward_plan`)
on small CPU tensors in the mixer's layout; :func:`compile_for` compiles one for an NVIDIA architecture with
``triton.compile`` and a ``GPUTarget``, its arguments specialised as Triton's launcher does (an int equal to 1 a
constant, ints and pointers divisible by 16 marked so), through Triton's bundled ptxas; :func:`resources` reads the
registers, stack (spills) and shared memory back with the bundled cuobjdump. Set ``TRITON_CACHE_DIR`` to a fresh folder
to be sure a kernel is compiled, not found: the cache's key leaves some environment switches out.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

import torch

from attnexp.mixers.euclid.ops.kernel.launches import (
    Call,
    Launch,
    Saved,
    Work,
    backward_plan,
    forward_plan,
    kernel,
    scores,
)

ARCHS = (80, 90)  # A100 and H100: the targets CI compiles for
TYPES = {
    torch.float32: "fp32",
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.uint8: "u8",
    torch.bool: "i1",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.float64: "fp64",
}
SM = {
    80: dict(registers=65536, shared=164 * 1024, threads=2048, blocks=32),
    90: dict(registers=65536, shared=228 * 1024, threads=2048, blocks=32),
}


def example(dtype: torch.dtype = torch.bfloat16, length: int = 1024, dim: int = 64, heads: int = 4) -> list[Any]:
    """q, k, v (1, heads, length, dim) as the mixer passes them: views of (1, length, heads * dim) projections."""
    return [torch.zeros(1, length, heads, dim, dtype=dtype).permute(0, 2, 1, 3) for _ in "qkv"]


def launches(dtype: torch.dtype = torch.bfloat16, length: int = 1024, dim: int = 64, causal: bool = False,
             eps: float = 1e-9) -> dict[str, Launch]:  # fmt: skip
    """Each kernel's launch for a forward and backward pass of ``example`` inputs (no mask), by kernel (or launch)
    name."""
    q, k, v = example(dtype, length, dim)
    b, h, n, d = q.shape
    call = Call(q, k, v, None, causal, scores(d**-0.5, eps))
    rows, plane = torch.zeros(b * h, n), torch.zeros(b * h, n, d)
    saved = Saved(
        torch.zeros_like(q), torch.zeros(3, b * h, n), torch.zeros(b * h, n, n, dtype=torch.uint8), rows, rows
    )
    work = Work(rows, plane, rows, plane, plane, *(torch.zeros_like(t) for t in (q, k, v)))
    found: dict[str, Launch] = {}
    for launch in forward_plan(call, saved) + backward_plan(call, saved, torch.zeros_like(q), work):
        found.setdefault(launch.label or launch.kernel, launch)
    return found


def arg_type(value: object) -> tuple[str, bool]:
    """(Triton's type of a launch argument, whether it is marked divisible by 16), as its launcher specialises it."""
    if isinstance(value, torch.Tensor):
        return "*" + TYPES[value.dtype], value.data_ptr() % 16 == 0
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value == 1):
        return "constexpr", False
    if isinstance(value, bool):
        return "u1", False
    if isinstance(value, int):
        return ("i32" if -(2**31) <= value < 2**31 else "i64"), value % 16 == 0
    return "fp32", False


def compile_for(launch: Launch, arch: int, fn: Any = None) -> Any:
    """``launch``'s kernel (or ``fn``, a ``triton.jit`` function) compiled for sm_``arch`` (a
    ``triton.compiler.CompiledKernel``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = kernel(launch.kernel) if fn is None else fn
    if not hasattr(fn, "arg_names"):
        raise RuntimeError("Triton's interpreter is on (TRITON_INTERPRET=1): it compiles nothing")
    meta = dict(launch.meta)
    options = {key: meta.pop(key) for key in ("num_warps", "num_stages") if key in meta}
    signature, constants, attrs = {}, dict(meta), {}
    for i, name in enumerate(fn.arg_names):  # type: ignore[attr-defined]
        if name in meta:
            signature[name] = "constexpr"
            continue
        value = launch.args[i]
        signature[name], divisible = arg_type(value)
        if signature[name] == "constexpr":
            constants[name] = value
        elif divisible:
            attrs[(i,)] = [["tt.divisibility", 16]]
    return triton.compile(
        ASTSource(fn, signature, constants, attrs), target=GPUTarget("cuda", arch, 32), options=options
    )


class Resources(NamedTuple):
    """What a compiled kernel takes per thread and per block, read from its binary."""

    registers: int
    stack: int  # bytes of local memory per thread: spilled registers (the kernels hold no local arrays)
    shared: int  # bytes per block, static and dynamic
    warps: int

    def blocks_per_sm(self, arch: int) -> int:
        """Blocks one SM holds at once, by registers (in whole warps of 256), shared memory and threads."""
        sm, threads = SM[arch], 32 * self.warps
        by_registers = sm["registers"] // (self.warps * -(-32 * max(self.registers, 1) // 256) * 256)
        by_shared = sm["shared"] // (self.shared + 1024) if self.shared else sm["blocks"]
        return min(by_registers, by_shared, sm["threads"] // threads, sm["blocks"])


def tool(name: str) -> str:
    """The path of one of the CUDA tools Triton bundles (ptxas, cuobjdump)."""
    from triton import knobs

    return getattr(knobs.nvidia, name).path


def dump(compiled: Any, flag: str) -> str:
    """cuobjdump's ``flag`` output for a compiled kernel's binary."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(compiled.asm["cubin"])
        return subprocess.run([tool("cuobjdump"), flag, str(path)], capture_output=True, text=True, check=True).stdout


def resources(compiled: Any) -> Resources:
    usage = dump(compiled, "--dump-resource-usage")
    fields = dict(part.split(":") for part in usage.split("Function", 1)[1].split() if part.count(":") == 1)
    return Resources(
        int(fields["REG"]),
        int(fields["STACK"]),
        int(fields["SHARED"]) + compiled.metadata.shared,
        compiled.metadata.num_warps,
    )


def sass(compiled: Any) -> str:
    """The kernel's machine code (SASS), as cuobjdump prints it."""
    return dump(compiled, "-sass")
