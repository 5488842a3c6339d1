"""Euclid's fused path in torch operations: the (B, H, L, D) inputs flattened to (N, L, D), autocast handled, and the
autograd function that fits the call: :class:`~attnexp.mixers.euclid.ops.rows.RowsEuclid` on a CPU outside a
compiled graph (the data read to find the rows needing exact distances), else
:class:`~attnexp.mixers.euclid.ops.fixed.FixedEuclid` (fixed shapes, no host reads: a compiled graph, a GPU
without Triton). A GPU with Triton runs :mod:`~attnexp.mixers.euclid.ops.kernel` instead (the mixer's choice).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
from torch import Tensor

from attnexp.mixers.euclid.formula import autocast_on, float32_math
from attnexp.mixers.euclid.ops.fixed import FixedEuclid, as_float, like
from attnexp.mixers.euclid.ops.rows import RowsEuclid
from attnexp.mixers.euclid.ops.tiles import LN2

# Off a CPU a compiled graph runs the fixed-shape function as its eager kernels (a graph break): traced into the graph
# on an H100 (torch 2.11, Triton) its backward pass gave zero gradients for q, k and v, the forward pass being right,
# where the same graph on a CPU gives the eager numbers. tests/gpu checks the compiled gradients against the eager ones.
EAGER_APPLY = torch.compiler.disable(FixedEuclid.apply)


def fused_euclid_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    scale: float,
    eps: float,
    function: type[torch.autograd.Function] | None = None,
) -> Tensor:
    """Euclid attention for (B, H, L, D) inputs through ``function``, or the one that fits the call (see the module's
    docstring). Distances, scores and their gradients are float32 (the score 1/distance magnifies their rounding);
    under autocast the weighted sum of the values and the values' gradient take the weights and the values in the
    autocast precision, as dot attention's does. ``mask`` broadcasts to (B, H, Lq, Lk), True = may attend.
    # (B, H, Lq, Dv)"""
    b, h, lq, _ = q.shape
    device = q.device.type
    low = torch.get_autocast_dtype(device) if autocast_on(device) else torch.float32
    q, k = (as_float(t.reshape(b * h, t.shape[-2], t.shape[-1])).contiguous() for t in (q, k))  # (N, L, D)
    values = v.reshape(b * h, v.shape[-2], v.shape[-1])
    values = (values if values.dtype == low else values.to(low)).contiguous()
    blocked = None if mask is None else ~mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape))
    compiling = torch.compiler.is_compiling()
    if function is None:
        function = RowsEuclid if device == "cpu" and not compiling else FixedEuclid
    apply = EAGER_APPLY if function is FixedEuclid and device != "cpu" and compiling else function.apply
    with float32_math(device) if function is FixedEuclid or autocast_on(device) else nullcontext():  # rows: eager
        out = apply(q, k, values, blocked, h, scale * LN2, eps * LN2)
    out = out.view(b, h, lq, v.shape[-1])
    return like(out, v) if low == torch.float32 else out.to(low)
