"""Euclid attention for small score matrices: one autograd function with a hand-written backward pass.

On a CPU the compiled kernel of :mod:`attnexp.attention.euclid_native` computes the same maths where it
could be built; this torch version runs elsewhere (GPU, no C compiler). At the sizes of the patch
models (16 to 64 tokens) a training step is bound by the number of kernels and passes over the (L, L)
scores, not by arithmetic: the explicit formula records about 20 element-wise operations in
autograd's graph forward and 30 backward. Here the forward pass runs without a graph and in place
where it can: the scale and the keys' squared norms go into the q.k matmul (``baddbmm``), then the
distance, the score ``z`` and the softmax ``p``; it saves ``p`` and ``w = z^2 / distance``, the derivative of the score by the squared distance up to the constant factor
``-scale^2 / 2``, which the backward pass folds into its last two matmuls. Same formula as
:func:`attnexp.attention.distance.score`, with the gradient 0 where a distance is 0 (a key equal to its
query); the numbers differ from the explicit path's by rounding, and below a squared distance of
``TINY`` (1e-30), where the explicit path's gradient is already 0 and this one is not yet.

Gradients (scaled squared distance ``x = scale^2 (||q||^2 + ||k||^2 - 2 q.k)``, ``distance = sqrt(x)``,
``z = 1 / (distance + eps)``, so ``dz/dx = -z^2 / (2 distance)`` and ``dx/dq = 2 scale^2 (q - k)``)::

    g  = p * (dp - rowsum(p * dp)) * w        the softmax backward times w
    dq = -scale^2 (rowsum(g) * q - g k)     dk = -scale^2 (colsum(g) * k - g^T q)     dv = p^T dout
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from attnexp.attention.euclid_native import native_euclid_attention


def _flat(t: Tensor) -> Tensor:
    return t.reshape(-1, t.shape[-2], t.shape[-1])  # (B, H, L, D) -> (B * H, L, D)


class SmallEuclidAttention(torch.autograd.Function):
    """softmax(1 / (||q - k|| * scale + eps)) v on (B, H, L, D) tensors; ``mask`` bool, broadcast to
    (B, H, Lq, Lk), True = may attend; a fully masked query gives zeros."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, eps: float) -> Tensor:
        *lead, lq, _ = q.shape
        q3, k3, v3 = _flat(q), _flat(k), _flat(v)  # (N, L, D)
        s2 = scale * scale
        q_sq = torch.linalg.vecdot(q3, q3).mul_(s2).unsqueeze(-1)  # (N, Lq, 1)
        k_sq = torch.linalg.vecdot(k3, k3).unsqueeze(-2)  # (N, 1, Lk)
        x = torch.baddbmm(k_sq, q3, k3.transpose(1, 2), beta=s2, alpha=-2.0 * s2).add_(q_sq)  # (N, Lq, Lk)
        distance = x.clamp_min_(0.0).sqrt_()  # scale * ||q - k||
        z = (distance + eps).reciprocal_()
        if mask is None:
            p = z.softmax(-1)
        else:
            allowed = _flat(mask.expand(*lead, lq, k.shape[-2]))
            p = z.masked_fill(~allowed, float("-inf")).softmax(-1).masked_fill_(~allowed.any(-1, keepdim=True), 0.0)
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            w = z.square_().div_(distance).nan_to_num_(posinf=0.0)  # inf at distance 0: there the gradient is 0
            ctx.save_for_backward(q3, k3, v3, p, w)
        else:
            ctx.save_for_backward(None, None, v3, p, None)
        ctx.shape, ctx.s2 = (*lead, lq, v.shape[-1]), s2
        return torch.bmm(p, v3).view(ctx.shape)  # (B, H, Lq, D)

    @staticmethod
    @once_differentiable
    def backward(ctx, dout: Tensor):
        q, k, v, p, w = ctx.saved_tensors
        with torch.autocast(dout.device.type, enabled=False):  # a backward called under autocast keeps the forward's dtype
            dout = _flat(dout.to(p.dtype))  # (N, Lq, D)
            dv = torch.bmm(p.transpose(1, 2), dout).view(*ctx.shape[:-2], -1, ctx.shape[-1])
            if q is None:
                return None, None, dv, None, None, None
            g = torch._softmax_backward_data(torch.bmm(dout, v.transpose(1, 2)), p, -1, p.dtype).mul_(w)
            s2 = ctx.s2
            dq = torch.baddbmm(q * g.sum(-1, keepdim=True), g, k, beta=-s2, alpha=s2)
            dk = torch.baddbmm(k * g.sum(1).unsqueeze(-1), g.transpose(1, 2), q, beta=-s2, alpha=s2)
        return dq.view(ctx.shape[:-1] + q.shape[-1:]), dk.view(dv.shape[:-1] + k.shape[-1:]), dv, None, None, None


def small_euclid_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float, eps: float) -> Tensor:
    """Euclid attention computed in float32: by the compiled kernel on a CPU where it could be built
    (:mod:`attnexp.attention.euclid_native`), else by :class:`SmallEuclidAttention`.  # (B, H, Lq, D)"""
    out = native_euclid_attention(q, k, v, mask, scale, eps) if q.device.type == "cpu" else None
    if out is None:
        with torch.autocast(q.device.type, enabled=False):
            out = SmallEuclidAttention.apply(q.float(), k.float(), v.float(), mask, scale, eps)
    return out.to(v.dtype)
