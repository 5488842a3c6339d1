"""Euclid's Triton kernels as a torch operator: ``torch.ops.attnexp.euclid_attention`` with its backward pass
(``register_autograd``), so ``torch.compile`` keeps it in one graph (the operator is opaque to the compiler: its
shapes come from :func:`_forward_shapes`). It runs the launches :mod:`.launches` describes.

Triton is imported only when a kernel is launched: where it is missing this module imports, :func:`available` is
False and the mixer runs its torch path. Under Triton's interpreter (``TRITON_INTERPRET=1`` set before Triton is
first imported) the operator runs on CPU tensors, which the unit tests use.
"""

from __future__ import annotations

import importlib.util

import torch
from torch import Tensor

from attnexp.errors import AttnexpError
from attnexp.mixers.euclid.formula import autocast_on
from attnexp.mixers.euclid.ops.kernel.launches import (
    FORWARD_M,
    KEYS,
    Call,
    Saved,
    Work,
    backward_plan,
    blocks,
    forward_plan,
    interpreting,
    run,
    scores,
)

__all__ = ["available", "euclid_attention_op", "interpreting", "run", "triton_euclid_attention"]


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


@torch.library.custom_op("attnexp::euclid_attention", mutates_args=())
def euclid_attention_op(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, scale: float, eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    """(out, stats, tiles): euclid attention of (B, H, L, D) inputs of one dtype; for the backward pass each query's
    log-sum-exp, largest logit and sum of weights (3, B * H, Lq), and which tiles were computed from the differences
    (B * H, query blocks, key tiles + 1) (see :mod:`.forward`)."""
    out, stats, tiles = _forward_shapes(q, k, v, mask, causal, scale, eps)
    if out.numel() == 0 or k.shape[2] == 0:
        return out.zero_(), stats.zero_(), tiles.zero_()
    tiles.zero_()
    saved = Saved(out, stats, tiles, *row_norms(q, k))
    run(forward_plan(Call(q, k, v, mask, causal, scores(scale, eps)), saved))
    return out, stats, tiles


def row_norms(q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
    """Memory for the rows' norms, float32.  # (B * H, Lq), (B * H, Lk)"""
    b, h, lq, _ = q.shape
    return q.new_empty(b * h, lq, dtype=torch.float32), q.new_empty(b * h, k.shape[2], dtype=torch.float32)


@euclid_attention_op.register_fake
def _forward_shapes(q, k, v, mask, causal, scale, eps):
    b, h, lq, _ = q.shape
    tiles = (b * h, blocks(lq, FORWARD_M) + 1, blocks(k.shape[2], KEYS) + 1)
    return (
        q.new_empty(b, h, lq, v.shape[3]),
        q.new_empty(3, b * h, lq, dtype=torch.float32),
        q.new_empty(tiles, dtype=torch.uint8),
    )


@torch.library.custom_op("attnexp::euclid_attention_backward", mutates_args=())
def euclid_attention_backward_op(
    dout: Tensor, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, out: Tensor, stats: Tensor, tiles: Tensor,
    causal: bool, scale: float, eps: float,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """(dq, dk, dv) of :func:`euclid_attention_op`, contiguous, in the inputs' dtypes."""
    dq, dk, dv = _backward_shapes(dout, q, k, v, mask, out, stats, tiles, causal, scale, eps)
    b, h, lq, d = q.shape
    lk = k.shape[2]
    if not (lq and lk and b * h):  # nothing attended: zero gradients, as SDPA's
        return dq.zero_(), dk.zero_(), dv.zero_()
    dout = dout if dout.dtype == q.dtype else dout.to(q.dtype)
    saved = Saved(out, stats, tiles, *row_norms(q, k))
    summed = torch.zeros(b * h * lq * (d + 1), dtype=torch.float32, device=q.device)  # dQ's sums, then g's: one fill
    sums, row_sums = summed[: b * h * lq * d].view(b * h, lq, d), summed[b * h * lq * d :].view(b * h, lq)
    exact_dk, exact_dv = (t.new_empty(b * h, lk, t.shape[3], dtype=torch.float32) for t in (k, v))
    work = Work(torch.empty_like(saved.qs), sums, row_sums, exact_dk, exact_dv, dq, dk, dv)
    run(backward_plan(Call(q, k, v, mask, causal, scores(scale, eps)), saved, dout, work))
    return dq, dk, dv


@euclid_attention_backward_op.register_fake
def _backward_shapes(dout, q, k, v, mask, out, stats, tiles, causal, scale, eps):
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape))  # contiguous, as the kernels write


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, mask, causal, scale, eps = inputs
    out, stats, tiles = output
    ctx.save_for_backward(q, k, v, mask, out, stats, tiles)
    ctx.causal, ctx.scale, ctx.eps = causal, scale, eps


def _backward(ctx, dout: Tensor, dstats: Tensor, dtiles: Tensor):
    q, k, v, mask, out, stats, tiles = ctx.saved_tensors
    dq, dk, dv = euclid_attention_backward_op(dout, q, k, v, mask, out, stats, tiles, ctx.causal, ctx.scale, ctx.eps)
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
    k and v in q's. A query that may see no key gives zeros. float64 is refused: the kernels compute in float32
    (the torch paths, ``fused_euclid_attention``, take it, in float32 too).  # (B, H, Lq, Dv)"""
    device = q.device.type
    dtype = torch.get_autocast_dtype(device) if autocast_on(device) else q.dtype
    if dtype == torch.float64:
        raise AttnexpError(
            "euclid's Triton kernel computes in float32 and takes float32, bf16 or fp16 inputs, not float64: "
            "cast them, or run the torch path (model.path=explicit computes the formula through autograd)."
        )
    q, k, v = (t if t.dtype == dtype else t.to(dtype) for t in (q, k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return euclid_attention_op(q, k, v, mask, causal, float(scale), float(eps))[0]
