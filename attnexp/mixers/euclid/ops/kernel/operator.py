"""Euclid's Triton kernel as a torch operator: ``torch.ops.attnexp.euclid_attention`` with its backward pass
(``register_autograd``), so ``torch.compile`` keeps it in one graph (the operator is opaque to the compiler: its
shapes come from :func:`_forward_shapes`), and the launch of :mod:`~attnexp.mixers.euclid.ops.kernel.kernels`.

Triton is imported only when a kernel is launched: where it is missing this module imports, :func:`available` is
False and the mixer runs its torch path. Under Triton's interpreter (``TRITON_INTERPRET=1`` set before Triton is
first imported) the operator runs on CPU tensors, which the unit tests use.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType

import torch
from torch import Tensor

from attnexp.mixers.euclid.formula import ROW_NEAR

BLOCK_M = 64  # queries per tile
BLOCK_N = 64  # keys per tile: the same in every kernel, so the backward passes recompute the forward's tiles
NUM_WARPS = 4


def interpreting() -> bool:
    """Whether Triton's interpreter is asked for (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def has_triton() -> bool:
    """Whether Triton is installed (torch's CUDA wheels bring it), found without importing it."""
    try:
        return importlib.util.find_spec("triton") is not None
    except ValueError:  # sys.modules["triton"] is None: its import is blocked
        return False


HAS_TRITON = has_triton()  # once, so that a compiled graph reads a constant


def available(device: torch.device) -> bool:
    """Whether the mixer runs the kernel on ``device``: a GPU (CUDA or ROCm) with Triton. The operator itself also
    runs on CPU tensors under Triton's interpreter (the unit tests), far too slowly to train with."""
    return device.type == "cuda" and HAS_TRITON


def _blocks(n: int, size: int) -> int:
    return -(-n // size)


def _width(n: int) -> int:
    """The kernels' block width for a head dimension of n: a power of 2, at least 16 (``tl.dot``'s least)."""
    return max(16, 1 << (n - 1).bit_length())


def kernels() -> ModuleType:
    return importlib.import_module("attnexp.mixers.euclid.ops.kernel.kernels")


def _mask_kind(mask: Tensor | None) -> int:
    return 0 if mask is None else 1 if mask.dtype == torch.bool else 2


def _mask_args(mask: Tensor | None, q: Tensor, lk: int) -> tuple[Tensor, tuple[int, ...]]:
    """The mask as the kernel reads it (bool as uint8, a view) broadcast to (B, H, Lq, Lk), and its strides."""
    if mask is None:
        return q, (0, 0, 0, 0)
    full = mask.view(torch.uint8) if mask.dtype == torch.bool else mask
    full = full.reshape((1,) * (4 - full.dim()) + tuple(full.shape)).expand(q.shape[0], q.shape[1], q.shape[2], lk)
    return full, tuple(full.stride())


def _launch(kernel: object, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, *tensors: Tensor, grid: tuple,
            causal: bool, scale: float, eps: float, o_strides: tuple[int, ...]) -> None:  # fmt: skip
    h, lq, d = q.shape[1:]
    lk, dv = k.shape[2], v.shape[3]
    m, m_strides = _mask_args(mask, q, lk)
    kernel[grid](  # type: ignore[index]
        q, k, v, m, *tensors,
        *q.stride(), *k.stride(), *v.stride(), *m_strides, *o_strides,
        h, lq, lk, d, dv, scale * scale, eps, ROW_NEAR,
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_D=_width(d),
        BLOCK_DV=_width(dv), MASK=_mask_kind(mask), CAUSAL=causal,
        DOT=2 if interpreting() else int(q.dtype == torch.float32), num_warps=NUM_WARPS,
    )  # fmt: skip


@torch.library.custom_op("attnexp::euclid_attention", mutates_args=())
def euclid_attention_op(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, scale: float, eps: float
) -> tuple[Tensor, Tensor]:
    """(out, stats): euclid attention of (B, H, L, D) inputs of one dtype, and for the backward pass each query's
    largest base-2 logit, sum of weights before normalising and whether it had an exact pair (3, B, H, Lq)."""
    b, h, lq, _ = q.shape
    out = q.new_empty(b, h, lq, v.shape[3])
    stats = torch.zeros(3, b, h, lq, dtype=torch.float32, device=q.device)
    if out.numel() == 0:
        return out.zero_(), stats
    grid = (_blocks(lq, BLOCK_M), b * h)
    _launch(kernels().euclid_forward, q, k, v, mask, out, stats, grid=grid, causal=causal, scale=scale, eps=eps,
            o_strides=out.stride())  # fmt: skip
    return out, stats


@euclid_attention_op.register_fake
def _forward_shapes(q, k, v, mask, causal, scale, eps):
    b, h, lq, _ = q.shape
    return q.new_empty(b, h, lq, v.shape[3]), q.new_empty(3, b, h, lq, dtype=torch.float32)


@torch.library.custom_op("attnexp::euclid_attention_backward", mutates_args=())
def euclid_attention_backward_op(
    dout: Tensor, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, out: Tensor, stats: Tensor, causal: bool,
    scale: float, eps: float,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """(dq, dk, dv) of :func:`euclid_attention_op`, in the inputs' dtypes."""
    b, h, lq, d = q.shape
    lk = k.shape[2]
    if not (lq and lk and b * h):  # nothing attended: zero gradients, as SDPA's
        return torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    # contiguous, in the inputs' dtypes: the kernels write every element from their float32 sums
    dq = torch.empty(b, h, lq, d, dtype=q.dtype, device=q.device)
    dk = torch.empty(b, h, lk, d, dtype=k.dtype, device=q.device)
    dv = torch.empty(b, h, lk, v.shape[3], dtype=v.dtype, device=q.device)
    dout = dout.to(q.dtype).contiguous()
    delta = torch.linalg.vecdot(dout.float(), out.float())  # rowsum(p * dp) = dout . out  # (B, H, Lq)
    found = kernels()
    common = dict(causal=causal, scale=scale, eps=eps, o_strides=dout.stride())
    rows, cols = (_blocks(lq, BLOCK_M), b * h), (_blocks(lk, BLOCK_N), b * h)
    _launch(found.euclid_backward_delta, q, k, v, mask, dout, stats, delta, grid=rows, **common)
    _launch(found.euclid_backward_keys, q, k, v, mask, dout, stats, delta, dk, dv, grid=cols, **common)
    _launch(found.euclid_backward_queries, q, k, v, mask, dout, stats, delta, dq, grid=rows, **common)
    return dq, dk, dv


@euclid_attention_backward_op.register_fake
def _backward_shapes(dout, q, k, v, mask, out, stats, causal, scale, eps):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, mask, causal, scale, eps = inputs
    out, stats = output
    ctx.save_for_backward(q, k, v, mask, out, stats)
    ctx.causal, ctx.scale, ctx.eps = causal, scale, eps


def _backward(ctx, dout: Tensor, dstats: Tensor):
    q, k, v, mask, out, stats = ctx.saved_tensors
    dq, dk, dv = euclid_attention_backward_op(dout, q, k, v, mask, out, stats, ctx.causal, ctx.scale, ctx.eps)
    return dq, dk, dv, None, None, None, None


euclid_attention_op.register_autograd(_backward, setup_context=_setup_context)


def triton_euclid_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
    eps: float = 1e-9,
) -> Tensor:
    """softmax(1 / (||q - k|| * scale + eps) + mask) v as SDPA takes its arguments: (B, H, L, D) inputs, ``mask``
    boolean (True: may attend) or additive, broadcast to (B, H, Lq, Lk), ``causal`` the lower triangle (with the mask,
    both apply); ``scale`` defaults to D^-0.5. Under autocast the inputs go in its precision, as SDPA's do; otherwise
    k and v in q's. A query that may see no key gives zeros.  # (B, H, Lq, Dv)"""
    device = q.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else q.dtype
    q, k, v = (t if t.dtype == dtype else t.to(dtype) for t in (q, k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return euclid_attention_op(q, k, v, mask, causal, float(scale), float(eps))[0]
