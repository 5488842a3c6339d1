"""Euclid's Triton kernels: the forward pass, and the backward's three (rowsum(p * dp) where a row has an exact
pair, the keys' side, the queries' side), flash-style: tiles on chip, memory O(L). Imported when
:mod:`~attnexp.mixers.euclid.ops.kernel.operator` launches one.

Per tile of BLOCK_M queries and BLOCK_N keys, :func:`~attnexp.mixers.euclid.ops.kernel.tiles.tile_distances` takes
the squared distance from the expansion ``||q||^2 + ||k||^2 - 2 q.k`` (norms in float32, q.k in the inputs'
precision, accumulated in float32). A query row whose nearest key in the tile is close enough for the expansion's
rounding to show (squared distance at most ``row_near`` times ``||q||^2``, the CPU path's rule) gets its two nearest
keys in the tile (by the expansion) from the differences ``q - k`` (their key rows loaded again) and every other key
of the tile floored at the farther of the two: the fixed-shape path's rule, applied per tile. The branch runs only in
tiles that hold such a row, and each row's numbers depend on that row alone. The backward passes recompute the same
tiles (the key blocks start at the same multiples of BLOCK_N) and take the exact pairs' gradient terms from the
differences: the queries' directly, the keys' through a product with the one-hot matrix of the pairs in float32 (a
sum of exact terms).

Scores: ``z = 1 / (sqrt(x) + eps)`` with ``x = scale^2 ||q - k||^2``, in base 2 for ``exp2`` (times log2 e, plus an
additive mask's value times log2 e); the running maximum is kept as flash attention keeps it. The backward passes
get each row's maximum and sum apart (STATS), not their log-sum-exp: a score of 1/eps (a key equal to its query) is
~1e9, where float32's spacing is 64, so adding log2 of the sum would lose it (two such keys got weight 1 each).
"""

from __future__ import annotations

import triton
import triton.language as tl

from attnexp.mixers.euclid.ops.kernel.tiles import (
    grad_matmul,
    grad_operand,
    load_rows,
    matmul,
    pair_terms,
    row_stats,
    scores,
    softmax_weights,
    tile_distances,
    weight_grads,
)


@triton.jit
def euclid_forward(
    Q, K, V, M, OUT, STATS,
    s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd, s_vb, s_vh, s_vn, s_vd, s_mb, s_mh, s_mm, s_mn,
    s_ob, s_oh, s_om, s_od, heads, lq, lk, d_real, dv_real, s2, eps, row_near,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    MASK: tl.constexpr, CAUSAL: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """O = softmax(z + mask) V for BLOCK_M queries of one (batch, head). STATS[0, bh], STATS[1, bh]: each row's
    largest base-2 logit (0 where none) and sum of 2^(logit - largest) (1 where none); STATS[2, bh]: 1 where the row
    had an exact pair in some tile, else 0."""
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b, h = bh // heads, bh % heads
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q_base, k_base = Q + b * s_qb + h * s_qh, K + b * s_kb + h * s_kh
    v_base, m_base = V + b * s_vb + h * s_vh, M + b * s_mb + h * s_mh
    q = load_rows(q_base, offs_m, s_qm, s_qd, lq, d_real, BLOCK_D)
    qf = q.to(tl.float32)
    q_sq = tl.sum(qf * qf, 1)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    flag = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_DV), tl.float32)
    end = lk
    if CAUSAL:
        end = tl.minimum(lk, start_m + BLOCK_M)
    for start_n in range(0, end, BLOCK_N):
        k = load_rows(k_base, start_n + tl.arange(0, BLOCK_N), s_kn, s_kd, lk, d_real, BLOCK_D)
        x, allowed, bias, hit1, _hit2 = tile_distances(
            q, qf, q_sq, k, k_base, s_kn, s_kd, m_base, s_mm, s_mn, offs_m, start_n, lq, lk, d_real, s2,
            row_near, BLOCK_M, BLOCK_N, BLOCK_D, MASK, CAUSAL, DOT,
        )  # fmt: skip
        _z, logit = scores(x, allowed, bias, eps)
        m_new = tl.maximum(m_i, tl.max(logit, 1))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(logit - shift[:, None])
        alpha = tl.exp2(m_i - shift)
        v = load_rows(v_base, start_n + tl.arange(0, BLOCK_N), s_vn, s_vd, lk, dv_real, BLOCK_DV)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + matmul(p.to(v.dtype), v, DOT)
        m_i = m_new
        flag = tl.maximum(flag, tl.max(hit1.to(tl.float32), 1))
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]  # a row that sees no key: 0 (NaN stays NaN)
    cols = tl.arange(0, BLOCK_DV)
    o_ptrs = OUT + b * s_ob + h * s_oh + offs_m[:, None] * s_om + cols[None, :] * s_od
    tl.store(o_ptrs, out.to(OUT.dtype.element_ty), mask=(offs_m[:, None] < lq) & (cols[None, :] < dv_real))
    rows = tl.num_programs(1) * lq
    tl.store(STATS + bh * lq + offs_m, tl.where(m_i == float("-inf"), 0.0, m_i), mask=offs_m < lq)
    tl.store(STATS + rows + bh * lq + offs_m, tl.where(l_i == 0.0, 1.0, l_i), mask=offs_m < lq)
    tl.store(STATS + 2 * rows + bh * lq + offs_m, flag, mask=offs_m < lq)


@triton.jit
def euclid_backward_delta(
    Q, K, V, M, DO, STATS, DELTA,
    s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd, s_vb, s_vh, s_vn, s_vd, s_mb, s_mh, s_mm, s_mn,
    s_ob, s_oh, s_om, s_od, heads, lq, lk, d_real, dv_real, s2, eps, row_near,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    MASK: tl.constexpr, CAUSAL: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """rowsum(p * dp) from the tiles' own weights and dp, for the rows with an exact pair (the others keep
    dO . O). Where the pair holds all the weight the two cancel exactly in dp - rowsum(p * dp), which the factor
    z^2 / d (up to 1/eps^3) multiplies; dO . O, rounded apart (and O stored in bf16), did not cancel."""
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    flagged = tl.load(STATS + 2 * tl.num_programs(1) * lq + bh * lq + offs_m, mask=offs_m < lq, other=0.0) > 0
    if tl.max(flagged.to(tl.int32), 0) > 0:
        b, h = bh // heads, bh % heads
        q_base, k_base = Q + b * s_qb + h * s_qh, K + b * s_kb + h * s_kh
        v_base, m_base = V + b * s_vb + h * s_vh, M + b * s_mb + h * s_mh
        q = load_rows(q_base, offs_m, s_qm, s_qd, lq, d_real, BLOCK_D)
        qf = q.to(tl.float32)
        q_sq = tl.sum(qf * qf, 1)
        do = load_rows(DO + b * s_ob + h * s_oh, offs_m, s_om, s_od, lq, dv_real, BLOCK_DV)
        top, total = row_stats(STATS, bh, offs_m, lq)
        delta = tl.zeros((BLOCK_M,), tl.float32)
        end = lk
        if CAUSAL:
            end = tl.minimum(lk, start_m + BLOCK_M)
        for start_n in range(0, end, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            k = load_rows(k_base, offs_n, s_kn, s_kd, lk, d_real, BLOCK_D)
            v = load_rows(v_base, offs_n, s_vn, s_vd, lk, dv_real, BLOCK_DV)
            x, allowed, bias, _hit1, _hit2 = tile_distances(
                q, qf, q_sq, k, k_base, s_kn, s_kd, m_base, s_mm, s_mn, offs_m, start_n, lq, lk, d_real, s2,
                row_near, BLOCK_M, BLOCK_N, BLOCK_D, MASK, CAUSAL, DOT,
            )  # fmt: skip
            _z, logit = scores(x, allowed, bias, eps)
            delta += tl.sum(softmax_weights(logit, allowed, top, total) * matmul(do, tl.trans(v), DOT), 1)
        tl.store(DELTA + bh * lq + offs_m, delta, mask=flagged & (offs_m < lq))


@triton.jit
def euclid_backward_keys(
    Q, K, V, M, DO, STATS, DELTA, DK, DV,
    s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd, s_vb, s_vh, s_vn, s_vd, s_mb, s_mh, s_mm, s_mn,
    s_ob, s_oh, s_om, s_od, heads, lq, lk, d_real, dv_real, s2, eps, row_near,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    MASK: tl.constexpr, CAUSAL: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """dK and dV of BLOCK_N keys of one (batch, head), over every query block that may see them, summed in float32.
    dO has the output's strides; dK and dV are contiguous (B, H, Lk, D) in the inputs' dtypes."""
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1)
    b, h = bh // heads, bh % heads
    offs_n = start_n + tl.arange(0, BLOCK_N)
    q_base, k_base = Q + b * s_qb + h * s_qh, K + b * s_kb + h * s_kh
    v_base, m_base = V + b * s_vb + h * s_vh, M + b * s_mb + h * s_mh
    do_base = DO + b * s_ob + h * s_oh
    k = load_rows(k_base, offs_n, s_kn, s_kd, lk, d_real, BLOCK_D)
    v = load_rows(v_base, offs_n, s_vn, s_vd, lk, dv_real, BLOCK_DV)
    kf = k.to(tl.float32)
    dk = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_DV), tl.float32)
    first = 0
    if CAUSAL:
        first = (start_n // BLOCK_M) * BLOCK_M
    for start_m in range(first, lq, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q = load_rows(q_base, offs_m, s_qm, s_qd, lq, d_real, BLOCK_D)
        qf = q.to(tl.float32)
        q_sq = tl.sum(qf * qf, 1)
        x, allowed, bias, hit1, hit2 = tile_distances(
            q, qf, q_sq, k, k_base, s_kn, s_kd, m_base, s_mm, s_mn, offs_m, start_n, lq, lk, d_real, s2,
            row_near, BLOCK_M, BLOCK_N, BLOCK_D, MASK, CAUSAL, DOT,
        )  # fmt: skip
        z, logit = scores(x, allowed, bias, eps)
        top, total = row_stats(STATS, bh, offs_m, lq)
        p = softmax_weights(logit, allowed, top, total)
        do = load_rows(do_base, offs_m, s_om, s_od, lq, dv_real, BLOCK_DV)
        dv += matmul(tl.trans(p.to(do.dtype)), do, DOT)
        delta = tl.load(DELTA + bh * lq + offs_m, mask=offs_m < lq, other=0.0)
        w = weight_grads(x, z, p, matmul(do, tl.trans(v), DOT), delta)
        exact = hit1 | hit2
        general = grad_operand(tl.where(exact, 0.0, w), q)
        dk += s2 * (grad_matmul(tl.trans(general), q, DOT) - tl.sum(general.to(tl.float32), 0)[:, None] * kf)
        if tl.max(tl.max(exact.to(tl.int32), 1), 0) > 0:  # the exact pairs' terms w (k_j - q_i), summed exactly
            term1 = pair_terms(hit1, w, qf, k_base, s_kn, s_kd, start_n, lk, d_real, BLOCK_N, BLOCK_D)
            term2 = pair_terms(hit2, w, qf, k_base, s_kn, s_kd, start_n, lk, d_real, BLOCK_N, BLOCK_D)
            dk -= s2 * tl.dot(tl.trans(hit1.to(tl.float32)), term1, input_precision="ieee")
            dk -= s2 * tl.dot(tl.trans(hit2.to(tl.float32)), term2, input_precision="ieee")
    cols_d, cols_v = tl.arange(0, BLOCK_D), tl.arange(0, BLOCK_DV)
    row = bh * lk + offs_n
    keys = offs_n[:, None] < lk
    tl.store(
        DK + row[:, None] * d_real + cols_d[None, :], dk.to(DK.dtype.element_ty), mask=keys & (cols_d[None, :] < d_real)
    )
    tl.store(
        DV + row[:, None] * dv_real + cols_v[None, :],
        dv.to(DV.dtype.element_ty),
        mask=keys & (cols_v[None, :] < dv_real),
    )


@triton.jit
def euclid_backward_queries(
    Q, K, V, M, DO, STATS, DELTA, DQ,
    s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd, s_vb, s_vh, s_vn, s_vd, s_mb, s_mh, s_mm, s_mn,
    s_ob, s_oh, s_om, s_od, heads, lq, lk, d_real, dv_real, s2, eps, row_near,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    MASK: tl.constexpr, CAUSAL: tl.constexpr, DOT: tl.constexpr,
):  # fmt: skip
    """dQ of BLOCK_M queries of one (batch, head), over every key block they may see, summed in float32; dQ contiguous
    (B, H, Lq, D) in the inputs' dtype."""
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b, h = bh // heads, bh % heads
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q_base, k_base = Q + b * s_qb + h * s_qh, K + b * s_kb + h * s_kh
    v_base, m_base = V + b * s_vb + h * s_vh, M + b * s_mb + h * s_mh
    q = load_rows(q_base, offs_m, s_qm, s_qd, lq, d_real, BLOCK_D)
    qf = q.to(tl.float32)
    q_sq = tl.sum(qf * qf, 1)
    do = load_rows(DO + b * s_ob + h * s_oh, offs_m, s_om, s_od, lq, dv_real, BLOCK_DV)
    top, total = row_stats(STATS, bh, offs_m, lq)
    delta = tl.load(DELTA + bh * lq + offs_m, mask=offs_m < lq, other=0.0)
    dq = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    end = lk
    if CAUSAL:
        end = tl.minimum(lk, start_m + BLOCK_M)
    for start_n in range(0, end, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = load_rows(k_base, offs_n, s_kn, s_kd, lk, d_real, BLOCK_D)
        v = load_rows(v_base, offs_n, s_vn, s_vd, lk, dv_real, BLOCK_DV)
        x, allowed, bias, hit1, hit2 = tile_distances(
            q, qf, q_sq, k, k_base, s_kn, s_kd, m_base, s_mm, s_mn, offs_m, start_n, lq, lk, d_real, s2,
            row_near, BLOCK_M, BLOCK_N, BLOCK_D, MASK, CAUSAL, DOT,
        )  # fmt: skip
        z, logit = scores(x, allowed, bias, eps)
        p = softmax_weights(logit, allowed, top, total)
        w = weight_grads(x, z, p, matmul(do, tl.trans(v), DOT), delta)
        exact = hit1 | hit2
        general = grad_operand(tl.where(exact, 0.0, w), k)
        dq += s2 * (grad_matmul(general, k, DOT) - tl.sum(general.to(tl.float32), 1)[:, None] * qf)
        if tl.max(tl.max(exact.to(tl.int32), 1), 0) > 0:  # the exact pairs' terms w (k_j - q_i)
            dq += s2 * pair_terms(hit1, w, qf, k_base, s_kn, s_kd, start_n, lk, d_real, BLOCK_N, BLOCK_D)
            dq += s2 * pair_terms(hit2, w, qf, k_base, s_kn, s_kd, start_n, lk, d_real, BLOCK_N, BLOCK_D)
    cols_d = tl.arange(0, BLOCK_D)
    row = bh * lq + offs_m
    tl.store(
        DQ + row[:, None] * d_real + cols_d[None, :], dq.to(DQ.dtype.element_ty),
        mask=(offs_m[:, None] < lq) & (cols_d[None, :] < d_real),
    )  # fmt: skip
