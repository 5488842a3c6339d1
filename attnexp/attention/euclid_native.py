"""Euclid attention's CPU kernel (``euclid_kernel.c``): compiled once per machine, cached on disk, called through ctypes.

On the first euclid step on a CPU the system's C compiler (``$CC``, else ``cc``, ``gcc`` or ``clang``) builds the
kernel for this processor into ``$XDG_CACHE_HOME/attnexp/kernels`` (``~/.cache/attnexp/kernels``), which takes
under a second; later processes load the cached library. The kernel computes a head's whole score block in the
cache (distances, softmax, weighted sum, and the backward pass from the weights it saved) instead of a dozen
torch kernels over the (L, L) scores. Where it cannot be built (no compiler, an unsupported one), euclid runs
on the torch path of :mod:`attnexp.attention.euclid_small` after one warning; both give the formula's numbers
up to float32 rounding.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import warnings
from pathlib import Path

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

SOURCE = Path(__file__).with_name("euclid_kernel.c")
BASE_FLAGS = ["-O3", "-fno-math-errno", "-fPIC", "-shared"]
# Tried in turn: a compiler may not know OpenMP (then the kernel runs on one thread) or -march=native.
FLAG_SETS = [[*BASE_FLAGS, "-march=native", "-fopenmp"], [*BASE_FLAGS, "-march=native"], BASE_FLAGS]


def cache_dir() -> Path:
    """Where built kernels are kept: ``$XDG_CACHE_HOME/attnexp/kernels``, by default ``~/.cache/attnexp/kernels``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attnexp" / "kernels"


def _processor() -> str:
    """What a library built with -march=native depends on: the CPU's model and instruction-set flags."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    wanted = ("model name", "flags", "Features", "CPU part")
    return "\n".join(dict.fromkeys(line for line in lines if line.startswith(wanted)))


def _build(compiler: str, flags: list[str], path: Path) -> str | None:
    """Compile the kernel to ``path`` (atomically: concurrent jobs may build it at once); the error, or None.
    A compiler's failure is remembered beside it, so later processes do not try that compiler and flags again."""
    failed = path.with_name(f"{path.stem}-{hashlib.sha256(compiler.encode()).hexdigest()[:8]}.failed")
    try:
        if failed.exists():
            return failed.read_text()
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.stem}.{os.getpid()}.tmp")
        done = subprocess.run([compiler, *flags, str(SOURCE), "-o", str(partial)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            error = " ".join((done.stderr or done.stdout).split())[:300] or f"{compiler} exited with {done.returncode}"
            failed.write_text(error)
            return error
        os.replace(partial, path)
    except (OSError, subprocess.SubprocessError) as error:
        return str(error)
    return None


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    i64, ptr, f32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
    lib.euclid_forward.argtypes = [*[i64] * 5, *[ptr] * 4, f32, f32, *[ptr] * 3, ctypes.c_int]
    lib.euclid_backward.argtypes = [*[i64] * 5, *[ptr] * 6, f32, *[ptr] * 3, ctypes.c_int]
    lib.euclid_forward.restype = lib.euclid_backward.restype = ctypes.c_int  # 1: out of memory
    return lib


@functools.cache
def library() -> ctypes.CDLL | None:
    """The kernel, built on the first call in this machine's cache, or None (after one warning) where it cannot be."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    source, errors = SOURCE.read_bytes(), []
    for flags in FLAG_SETS:
        key = hashlib.sha256(b"\0".join([source, " ".join(flags).encode(), _processor().encode()]))  # not the compiler
        path = cache_dir() / f"euclid_kernel-{key.hexdigest()[:16]}.so"
        error = None if path.exists() else _build(compiler, flags, path) if compiler else "no C compiler was found"
        if error is None:
            try:
                return _declare(ctypes.CDLL(str(path)))
            except OSError as load_error:
                error = str(load_error)
        errors.append(error)
    warnings.warn(
        f"Euclid attention runs on its slower torch path on the CPU: its kernel {SOURCE.name} could not be built "
        f"({errors[-1]}). Install a C compiler (gcc or clang) or point CC at one; the numbers are the same up to "
        "float32 rounding.",
        RuntimeWarning,
        stacklevel=2,
    )
    return None


def _flat(t: Tensor) -> Tensor:
    return t.reshape(-1, t.shape[-2], t.shape[-1]).contiguous()  # (B, H, L, D) -> (B * H, L, D)


def _address(t: Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _check(failed: int) -> None:
    if failed:
        raise MemoryError("Euclid attention's CPU kernel could not allocate its scratch memory (a few score blocks).")


class NativeEuclidAttention(torch.autograd.Function):
    """softmax(1 / (||q - k|| * scale + eps)) v on float32 CPU tensors (B, H, L, D) by the compiled kernel;
    ``mask`` bool, broadcast to (B, H, Lq, Lk), True = may attend; a fully masked query gives zeros."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, eps: float) -> Tensor:
        *lead, lq, d = q.shape
        lk, dv = v.shape[-2:]
        q3, k3, v3 = _flat(q), _flat(k), _flat(v)  # (N, L, D)
        allowed = None if mask is None else _flat(mask.expand(*lead, lq, lk)).view(torch.uint8)  # (N, Lq, Lk)
        n = q3.shape[0]
        needs_w = ctx.needs_input_grad[0] or ctx.needs_input_grad[1]  # as the torch path: w only for dq and dk
        out, p = q3.new_empty(n, lq, dv), q3.new_empty(n, lq, lk)
        w = q3.new_empty(n, lq, lk) if needs_w else None
        _check(library().euclid_forward(n, lq, lk, d, dv, *map(_address, (q3, k3, v3, allowed)), scale, eps,
                                        *map(_address, (out, p, w)), torch.get_num_threads()))
        ctx.save_for_backward(q3, k3, v3, p, w)
        ctx.scale, ctx.shapes = scale, (q.shape, k.shape, v.shape)
        return out.view(*lead, lq, dv)  # (B, H, Lq, D)

    @staticmethod
    @once_differentiable
    def backward(ctx, dout: Tensor):
        q3, k3, v3, p, w = ctx.saved_tensors
        w = torch.zeros_like(p) if w is None else w  # only v asked for a gradient: dq and dk come out 0, unused
        (n, lq, d), (lk, dv) = q3.shape, v3.shape[-2:]
        dout = _flat(dout.float())  # (N, Lq, D)
        dq, dk, dvalues = torch.empty_like(q3), torch.empty_like(k3), torch.empty_like(v3)
        _check(library().euclid_backward(n, lq, lk, d, dv, *map(_address, (q3, k3, v3, p, w, dout)), ctx.scale,
                                         *map(_address, (dq, dk, dvalues)), torch.get_num_threads()))
        q_shape, k_shape, v_shape = ctx.shapes
        return dq.view(q_shape), dk.view(k_shape), dvalues.view(v_shape), None, None, None


@torch.compiler.disable  # ctypes calls: under torch.compile this runs as it is, between the compiled graphs
def native_euclid_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, eps: float) -> Tensor | None:
    """:class:`NativeEuclidAttention` in float32, or None where the kernel could not be built.  # (B, H, Lq, D)"""
    if library() is None:
        return None
    return NativeEuclidAttention.apply(q.float(), k.float(), v.float(), mask, scale, eps)
