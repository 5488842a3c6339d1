"""The tile arithmetic euclid's Triton kernels share (:mod:`~attnexp.mixers.euclid.ops.kernel.kernels`): loading
blocks, the products in each precision, a tile's squared distances with its exact pairs, the scores, the weights and
their gradients. The backward passes call :func:`tile` with the forward pass's key blocks, so they see its numbers.
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def load_rows(base, offs, s_row, s_col, n_rows, n_cols, BLOCK_D: tl.constexpr):
    """The rows ``offs`` of a (n_rows, n_cols) matrix, zeros past its ends.  # (len(offs), BLOCK_D)"""
    cols = tl.arange(0, BLOCK_D)
    inside = (offs[:, None] < n_rows) & (cols[None, :] < n_cols)
    return tl.load(base + offs[:, None] * s_row + cols[None, :] * s_col, mask=inside, other=0.0)


@triton.jit
def matmul(a, b, DOT: tl.constexpr):
    """a @ b with float32 accumulation. DOT: 0 in the inputs' precision (bf16, fp16), 1 float32 in full (not tf32),
    2 Triton's interpreter (float32: there bf16 blocks are multiplied as their raw bits, Triton 3.8 and 3.9)."""
    if DOT == 0:
        r = tl.dot(a, b)
    elif DOT == 1:
        r = tl.dot(a, b, input_precision="ieee")
    else:
        r = tl.dot(a.to(tl.float32), b.to(tl.float32))
    return r


@triton.jit
def grad_operand(w, like):
    """Gradient weights w (float32: the factor z^2 / d can pass fp16's range) as :func:`grad_matmul` multiplies them
    by blocks of ``like``'s dtype: bf16 as bf16 (its range is float32's), others as they are. The row and column sums
    that go with the product are taken from the same numbers, so the terms w (k_j - q_i) stay whole."""
    if like.dtype == tl.bfloat16:  # noqa: SIM108 (a conditional expression is not Triton syntax)
        r = w.to(tl.bfloat16)
    else:
        r = w
    return r


@triton.jit
def grad_matmul(w, m, DOT: tl.constexpr):
    """w @ m for w from :func:`grad_operand`: fp16 blocks as tf32 (fp16's mantissa, float32's range)."""
    if DOT != 0:
        r = matmul(w, m, DOT)
    elif m.dtype == tl.float16:
        r = tl.dot(w, m.to(tl.float32), input_precision="tf32")
    else:
        r = tl.dot(w, m)
    return r


@triton.jit
def tile_distances(
    q,
    qf,
    q_sq,
    k,
    k_base,
    s_kn,
    s_kd,
    m_base,
    s_mm,
    s_mn,
    offs_m,
    start_n,
    lq,
    lk,
    d_real,
    s2,
    row_near,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    MASK: tl.constexpr,
    CAUSAL: tl.constexpr,
    DOT: tl.constexpr,
):
    """One tile's squared scaled distances ``x`` (exact where it matters, +inf where blocked), the keys each query
    may attend, the additive mask in base 2 (zeros without one) and the exact pairs (two one-hot masks).
    q (M, D) in its dtype, qf the same in float32, q_sq (M,) its squared norms; k (N, D) the tile's keys."""
    offs_n = start_n + tl.arange(0, BLOCK_N)
    kf = k.to(tl.float32)
    k_sq = tl.sum(kf * kf, 1)
    qk = matmul(q, tl.trans(k), DOT)
    x = (q_sq[:, None] + k_sq[None, :] - 2.0 * qk) * s2
    x = tl.where(x < 0.0, 0.0, x)  # not tl.maximum, which drops a NaN
    allowed = (offs_m[:, None] < lq) & (offs_n[None, :] < lk)
    if CAUSAL:
        allowed = allowed & (offs_m[:, None] >= offs_n[None, :])
    bias = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if MASK == 1:
        keep = tl.load(m_base + offs_m[:, None] * s_mm + offs_n[None, :] * s_mn, mask=allowed, other=0)
        allowed = allowed & (keep != 0)
    if MASK == 2:
        bias = tl.load(m_base + offs_m[:, None] * s_mm + offs_n[None, :] * s_mn, mask=allowed, other=0.0)
        bias = bias.to(tl.float32) * LOG2E
        allowed = allowed & (bias > float("-inf"))
    x = tl.where(allowed, x, float("inf"))
    need = tl.min(x, 1) <= (row_near * s2) * q_sq  # (M,); NaN compares False
    hit1 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int1)
    hit2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int1)
    if tl.max(need.to(tl.int32), 0) > 0:
        cols = tl.arange(0, BLOCK_N)
        i1 = tl.argmin(x, 1)
        rest = tl.where(cols[None, :] == i1[:, None], float("inf"), x)
        i2 = tl.argmin(rest, 1)
        has2 = tl.min(rest, 1) < float("inf")
        diff1 = load_rows(k_base, start_n + i1, s_kn, s_kd, lk, d_real, BLOCK_D).to(tl.float32) - qf
        diff2 = load_rows(k_base, start_n + i2, s_kn, s_kd, lk, d_real, BLOCK_D).to(tl.float32) - qf
        x1 = tl.sum(diff1 * diff1, 1) * s2
        x2 = tl.sum(diff2 * diff2, 1) * s2
        floor = tl.maximum(x1, tl.where(has2, x2, 0.0))
        hit1 = need[:, None] & (cols[None, :] == i1[:, None])
        hit2 = (need & has2)[:, None] & (cols[None, :] == i2[:, None])
        x = tl.where(need[:, None] & allowed, tl.maximum(x, floor[:, None]), x)
        x = tl.where(hit1, x1[:, None], x)
        x = tl.where(hit2, x2[:, None], x)
    return x, allowed, bias, hit1, hit2


@triton.jit
def scores(x, allowed, bias, eps):
    """(z, base-2 logit): z = 1/(sqrt(x) + eps), the logit log2(e) z plus the mask's, -inf where blocked."""
    z = 1.0 / (tl.sqrt(x) + eps)
    return z, tl.where(allowed, z * LOG2E + bias, float("-inf"))


@triton.jit
def row_stats(STATS, bh, offs_m, lq):
    """Each row's largest logit and sum of weights, as the forward pass stored them (0 and 1 past the end)."""
    top = tl.load(STATS + bh * lq + offs_m, mask=offs_m < lq, other=0.0)
    total = tl.load(STATS + (tl.num_programs(1) + bh) * lq + offs_m, mask=offs_m < lq, other=1.0)
    return top, total


@triton.jit
def softmax_weights(logit, allowed, top, total):
    """softmax weights from the forward pass's row statistics.  # (M, N)"""
    return tl.where(allowed, tl.exp2(logit - top[:, None]) / total[:, None], 0.0)


@triton.jit
def weight_grads(x, z, p, dp, delta):
    """p (dp - delta) z^2 / d: the gradient of the loss over -dx/2 (0 where d = 0 and where blocked; NaN stays)."""
    d = tl.sqrt(x)
    return tl.where(d == 0.0, 0.0, p * z * z / d * (dp - delta[:, None]))


@triton.jit
def pair_terms(at, w, qf, k_base, s_kn, s_kd, start_n, lk, d_real, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    """Each query's term w_ij (k_j - q_i) of its exact pair in the one-hot ``at``, from the difference (zeros in a
    row without one).  # (M, D) float32"""
    key = start_n + tl.sum(tl.where(at, tl.arange(0, BLOCK_N)[None, :], 0), 1)
    near = load_rows(k_base, key, s_kn, s_kd, lk, d_real, BLOCK_D).to(tl.float32)
    return tl.sum(tl.where(at, w, 0.0), 1)[:, None] * (near - qf)
