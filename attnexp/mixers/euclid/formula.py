"""Euclid's score, 1 / (||q - k|| * scale + eps), and which distances are computed exactly.

Every path gets the squared distance of every pair from one matmul, the expansion ``||q||^2 + ||k||^2 - 2 q.k``.
Its rounding is a few float32 ulps of ``||q||^2 + ||k||^2``: harmless for most pairs, but a key close to its query
(where euclid puts its weight, the score growing like 1/distance) can be closer than that. Two rules say which
distances are recomputed from the difference ``q - k``, forward and backward (a third, per tile, is the Triton
kernel's: see :mod:`~attnexp.mixers.euclid.ops.kernel.forward`):

- **rows** (a CPU outside a compiled graph, where reading the data is free): every query row whose nearest key by
  the expansion is within :data:`ROW_NEAR` of its squared norm (:func:`exact_rows`) is recomputed whole: any pair the
  expansion resolves worse than ~1e-5 of its distance lies in such a row. Decided per row.
- **nearest keys** (fixed shapes, no host read: compiled graphs, GPUs without Triton): each query's :data:`NEAREST`
  nearest keys by the expansion (:func:`nearest_keys`); every other key is at least as far as the farthest of them
  (the expansion cannot tell more), so its squared distance is the expansion's, raised to that key's where it is
  below (its gradient stays the expansion's). A query with more than :data:`NEAREST` keys inside the expansion's
  rounding gets those beyond at the last exact key's score, and the keys beyond the nearest keep the expansion's
  rounding (norms far from the origin: ~1e-5 of the gradient).

The gradient, with ``x = scale^2 ||q - k||^2``, ``d = sqrt(x)``, ``z = 1 / (d + eps)``, ``p = softmax(z)``::

    g  = p * (dp - rowsum(p * dp)) * z^2 / d        dLoss/dx times -2, 0 where d = 0 (a key equal to its query)
    dq = -scale^2 sum_j g_ij (q_i - k_j)       dk = scale^2 sum_i g_ij (q_i - k_j)       dv = p^T dout

computed as ``-scale^2 (rowsum(g) q - g k)`` and ``scale^2 (g^T q - colsum(g) k)``, except that the exact pairs'
terms come from their differences.
"""

from __future__ import annotations

import functools
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import Tensor

from attnexp.errors import AttnexpError

NEAR = 1.0 / 64  # pairs with a squared distance below this share of ||q||^2 + ||k||^2 need the difference
# A near pair has ||k||^2 <= 1.43 ||q||^2 (the triangle inequality at NEAR), so every row holding one has a
# squared distance below ROW_NEAR * ||q||^2: one comparison per row finds them.
ROW_NEAR = NEAR * 2.4275
NEAREST = 2  # keys per query whose distance comes from the difference q - k (fixed shapes)
FAR = 1e30  # a blocked key's squared distance while the nearest are looked for: finite, so its bits keep their order
TINY = 1e-30  # squared distances below this count as 0 for the gradient of the square root
FLOAT32_MAX = float(torch.finfo(torch.float32).max)
INT32_MAX = 2**31 - 1


def check_eps(eps: object) -> float:
    """``model.eps`` as a float, or an error saying why: the score at distance 0 is 1/eps, a float32."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < float("inf"):
        raise AttnexpError(
            f"model.eps={eps!r} is not allowed: the euclid score is 1/(distance + eps), so eps must be a "
            "positive number (finite) such as 1e-9."
        )
    if not (2.0 / eps) ** 2 < FLOAT32_MAX:  # the gradient holds the score squared (base 2 on the fused path: 1.44/eps)
        raise AttnexpError(
            f"model.eps={eps!r} is too small: the euclid score of a key equal to its query is 1/eps, and "
            f"the gradient holds its square, which must stay inside float32 (largest {FLOAT32_MAX:.3g}): "
            f"below eps = {2 / FLOAT32_MAX**0.5:.3g} it would become inf or NaN. Use e.g. model.eps=1e-9."
        )
    return float(eps)


def autocast_on(device_type: str) -> bool:
    """Whether autocast (mixed precision) is on for the device type (the meta device has none)."""
    return device_type != "meta" and torch.is_autocast_enabled(device_type)


def float32_math(device_type: str) -> AbstractContextManager:
    """Autocast off: euclid's distances stay float32 (1/distance magnifies their rounding). Always, not only when
    autocast is on: a compiled graph traces the backward pass where it cannot tell."""
    return nullcontext() if device_type == "meta" else torch.autocast(device_type, enabled=False)


def expansion(q: Tensor, k: Tensor, s2: float, out: Tensor | None = None, plus: float = 0.0) -> Tensor:
    """``s2 ||q - k||^2 + plus`` of every pair by the expansion, one matmul.  # (N, Lq, D), (N, Lk, D) -> (N, Lq, Lk)"""
    q_sq, k_sq = torch.linalg.vecdot(q, q).unsqueeze(-1), torch.linalg.vecdot(k, k).unsqueeze(-2)
    if plus:
        q_sq = q_sq + plus / s2
    x = q_sq + k_sq if out is None else torch.add(q_sq, k_sq, out=out)
    return x.baddbmm_(q, k.transpose(1, 2), beta=s2, alpha=-2.0 * s2)


def ramp(
    length: int,
    step: int = 1,
    dtype: torch.dtype = torch.int64,
    device: torch.device | None = None,
    shape: tuple[int, ...] = (-1,),
) -> Tensor:
    """``arange(0, length * step, step).view(shape)``: outside a compiled graph the same tensor every call (a step
    asks for the same small ramps each time), so it costs no operation."""
    if torch.compiler.is_compiling():
        return torch.arange(0, length * step, step, dtype=dtype, device=device).view(shape)
    return _ramp(length, step, dtype, device, shape)


@functools.lru_cache(maxsize=64)
def _ramp(length: int, step: int, dtype: torch.dtype, device: torch.device | None, shape: tuple[int, ...]) -> Tensor:
    return torch.arange(0, length * step, step, dtype=dtype, device=device).view(shape)


def nearest_keys(x: Tensor, count: int, scratch: Tensor | None = None) -> Tensor:
    """Each row's ``count`` smallest entries of ``x`` (squared distances), as key indices; ties go to the first.

    The row minimum of the int32 view, with each entry's index in its low mantissa bits: non-negative floats order as
    their bits do, and ``amin`` is fast on every device (a CPU's ``topk`` and ``argmin`` took 5-20 times as long).
    The values are compared to ~2^-10 of themselves at 8192 keys (finer with fewer): near-equal keys are equally good.
    ``scratch``: int32 memory of x's shape to work in.  # (N, Lq, Lk) -> (N, Lq, count) int64
    """
    keys_n = x.shape[-1]
    low = (1 << max(1, (keys_n - 1).bit_length())) - 1
    keys = torch.bitwise_and(x.view(torch.int32), ~low, out=scratch)
    keys.bitwise_or_(ramp(keys_n, dtype=torch.int32, device=x.device))
    picks = []
    for r in range(count):
        idx = keys.amin(-1, keepdim=True).bitwise_and_(low).long()  # (N, Lq, 1); never the INT32_MAX put in below
        picks.append(idx)
        if r + 1 < count:
            keys.scatter_(-1, idx, INT32_MAX)
    return torch.cat(picks, -1)


def exact_rows(low: Tensor, q_sq: Tensor, floor: float = 0.0) -> tuple[Tensor, Tensor] | None:
    """The rows (group, query indices) whose smallest expanded squared distance ``low`` is at most ROW_NEAR times
    their squared norm ``q_sq`` (both scaled) or ``floor``, or None; one host read, and one more where there are some
    (a CPU outside a compiled graph). Decided per row: NaN compares False.  low, q_sq (n, c, 1)"""
    near = q_sq.mul(ROW_NEAR).clamp_min_(floor).ge_(low)
    if not near.any():
        return None
    at = near.view(near.shape[:2]).nonzero(as_tuple=True)
    return at[0], at[1]


def key_rows(idx: Tensor, keys: int) -> Tensor:
    """Indices into ``k.reshape(-1, D)`` of the keys ``idx`` (N, Lq, K) names.  # (N * Lq * K,)"""
    return (idx + ramp(idx.shape[0], keys, device=idx.device, shape=(-1, 1, 1))).view(-1)


def nearest_differences(
    q: Tensor, k: Tensor, idx: Tensor, out: Tensor | None = None, rows: Tensor | None = None
) -> Tensor:
    """``k_j - q_i`` for each query and its keys ``idx``, into ``out`` (N * Lq * K, D) if given; ``rows``: the keys'
    :func:`key_rows`, when known.  # (N, Lq, D), (N, Lk, D), (N, Lq, K) -> (N, Lq, K, D)"""
    rows = key_rows(idx, k.shape[-2]) if rows is None else rows
    picked = torch.index_select(k.reshape(-1, k.shape[-1]), 0, rows, out=out).view(*idx.shape, -1)
    return picked - q.unsqueeze(-2) if out is None else picked.sub_(q.unsqueeze(-2))


def finite_sqrt(x: Tensor) -> Tensor:
    """sqrt of x >= 0 with gradient 0 (not inf) at 0, and for x below TINY; NaN stays NaN."""
    return torch.where(x > 0, x.clamp_min(TINY).sqrt(), x * 0.0)


def euclid_score(q: Tensor, k: Tensor, scale: float, eps: float, mask: Tensor | None = None) -> Tensor:
    """1 / (||q - k|| * scale + eps) of every query and key row, through autograd (the explicit path), in float32.
    ``mask`` (True: may attend) keeps blocked keys from being a query's nearest. On a CPU outside a compiled graph the
    rows :func:`exact_rows` finds are recomputed whole from the differences; elsewhere each query's :data:`NEAREST`
    nearest keys are.  # (..., Lq, D), (..., Lk, D) -> (..., Lq, Lk)"""
    *lead, lq, dim = q.shape
    lk = k.shape[-2]
    if lq == 0 or lk == 0:  # zeros that keep the graph, as SDPA's
        return q.narrow(-1, 0, 0) @ k.narrow(-1, 0, 0).transpose(-2, -1)
    q3, k3 = q.float().reshape(-1, lq, dim), k.float().reshape(-1, lk, dim)  # (N, L, D)
    allowed = None if mask is None else mask.expand(*lead, lq, lk).reshape(-1, lq, lk)
    s2 = scale * scale
    with float32_math(q.device.type):
        x = expansion(q3, k3, s2)  # (N, Lq, Lk)
        if q.device.type == "cpu" and not torch.compiler.is_compiling():
            with torch.no_grad():
                far = x if allowed is None else x.masked_fill(~allowed, FAR)
                at = exact_rows(far.amin(-1, keepdim=True), torch.linalg.vecdot(q3, q3).unsqueeze(-1) * s2)
            if at is not None:  # whole rows from the differences
                x = x.index_put(at, (k3[at[0]] - q3[at].unsqueeze(-2)).square().sum(-1) * s2)
            z = 1.0 / (finite_sqrt(x) + eps)
        else:
            z = nearest_scores(q3, k3, x, allowed, s2, eps)
    return z.view(*lead, lq, lk)


def nearest_scores(q3: Tensor, k3: Tensor, x: Tensor, allowed: Tensor | None, s2: float, eps: float) -> Tensor:
    """The scores with each query's :data:`NEAREST` nearest keys by the expansion ``x`` from the differences, every
    other key floored at them (fixed shapes, no host read).  # (N, Lq, Lk)"""
    with torch.no_grad():
        idx = nearest_keys(x if allowed is None else x.masked_fill(~allowed, FAR), min(NEAREST, k3.shape[1]))
    exact = nearest_differences(q3, k3, idx).square().sum(-1) * s2  # (N, Lq, K)
    with torch.no_grad():
        farthest = exact if allowed is None else exact * allowed.gather(-1, idx)  # a blocked key sets no bound
        floor = farthest.amax(-1, keepdim=True)
    x = x + (x.clamp_min(floor) - x).detach()  # no key beyond the nearest is nearer than they are
    return (1.0 / (finite_sqrt(x) + eps)).scatter(-1, idx, 1.0 / (finite_sqrt(exact) + eps))
