"""Euclid's forward kernel, flash-style (tiles on chip, memory O(L)), and the squared norms every kernel reads.

Per tile of BLOCK_M queries and BLOCK_N keys the scores come from the expansion (one product, the norms computed once
per row by :func:`squared_norms`). A tile where some query's largest score reaches its threshold (a key within the
rows rule's ROW_NEAR of it, where the expansion's rounding shows, or a score above 64) is computed again from the
differences, every pair of it (:func:`~.tiles.exact_squares`): any number of near keys is exact. Such a tile is
marked in TILES, which the backward passes read to compute the same tiles the same way; the row statistics keep each
row's largest logit and sum apart (a score of 1/eps, ~1.4e9 in base 2, where float32's spacing is 128, would lose
the sum's log2) and their log-sum-exp for the tiles computed from the expansion, where scores stay below 92.
Interior tiles skip the bounds and causal arithmetic; the key tiles that cross the end or the diagonal run after.
"""

from __future__ import annotations

import triton
import triton.language as tl

from attnexp.mixers.euclid.ops.kernel.tiles import (
    FLOOR,
    allowed_pairs,
    exact_scores,
    exact_squares,
    hot_scores,
    load_rows,
    load_tile,
    matmul,
    rounded,
    score,
    store_rows,
)


# Triton kernels take long argument lists: kept a few to a line.
# fmt: off
@triton.jit
def squared_norms(X, OUT, s_b, s_h, s_r, s_d, heads, n, d_real, a, b, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    """a ||x||^2 + b of each row of a (B, H, n, D) tensor, in float32, into a contiguous (B * H, n).  # once per row"""
    bh = tl.program_id(0).to(tl.int64)
    start = tl.program_id(1) * BLOCK_R
    rows = tl.arange(0, BLOCK_R)
    base = X + (bh // heads) * s_b + (bh % heads) * s_h + tl.cast(start, tl.int64) * s_r
    x = load_tile(base, rows, s_r, s_d, n - start, d_real, BLOCK_D, True).to(tl.float32)
    tl.store(OUT + bh * n + start + rows, a * tl.sum(x * x, 1) + b, mask=rows < n - start)


@triton.jit
def forward_tile(
    q, z_flag, m_i, l_i, acc, rare_any, q_base, s_qm, s_qd, K, s_kn, s_kd, V, s_vn, s_vd, M, s_mm, s_mn, qs, KS, TILE,
    KEY_TILE, start_m, start_n, rows_left, lk, d_real, dv_real, neg2a, a, e2, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, MASK: tl.constexpr, BOUNDS: tl.constexpr,
    DIAG: tl.constexpr, DOT: tl.constexpr, FOLD: tl.constexpr, RARE: tl.constexpr,
):  # fmt: skip
    """One key tile's step of the online softmax: (m_i, l_i, acc, rare_any) updated. From the expansion, a tile
    where a query's largest score reaches its ``z_flag`` is left out and marked (TILE, and KEY_TILE for the backward
    pass's key blocks); RARE: a marked tile, from the differences. K, V, M, KS: the tile's first key (and the
    block's first query, for M); DIAG: the causal diagonal crosses the tile."""
    MASKED: tl.constexpr = BOUNDS or DIAG or MASK != 0
    rows, cols = tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_N)
    keys_left = lk - start_n
    k = load_tile(K, cols, s_kn, s_kd, keys_left, d_real, BLOCK_D, BOUNDS)
    v = load_tile(V, cols, s_vn, s_vd, keys_left, dv_real, BLOCK_DV, BOUNDS)
    ks = load_rows(KS, cols, keys_left, 1.0, BOUNDS)
    if RARE:
        x = exact_squares(q_base, rows, s_qm, rows_left, K, cols, s_kn, keys_left, s_qd, s_kd, d_real, a, BLOCK_M,
                          BLOCK_N)
        z, _d = exact_scores(x, e2)
    else:
        z = hot_scores(matmul(q, tl.trans(k), DOT), qs, ks, neg2a, e2, FOLD)  # (M, N)
    allowed, bias = z > 0.0, z  # stand-ins where nothing is masked
    if MASKED:
        m_ptrs = M + rows[:, None] * s_mm + cols[None, :] * s_mn
        allowed, bias = allowed_pairs(rows, cols, rows_left, keys_left, start_n - start_m, m_ptrs, BOUNDS, DIAG, MASK,
                                      True)
        z = tl.where(allowed, z, 0.0)
    top = tl.max(z, 1)
    skip = 0.0
    if not RARE:  # a near key or a high score: the tile is left out, for the loop of tiles from the differences
        rare = tl.max(top - z_flag, 0) >= 0
        if rare:
            tl.store(TILE, 1)
            tl.store(KEY_TILE, 1)
        rare_any = rare_any | rare.to(tl.int32)
        skip = tl.where(rare, float("inf"), 0.0)
    m_i, l_i, acc = online_softmax(z, top, allowed, bias, m_i, l_i, acc, v, skip, MASKED, DOT)
    return m_i, l_i, acc, rare_any


@triton.jit
def online_softmax(z, top, allowed, bias, m_i, l_i, acc, v, skip, MASKED: tl.constexpr, DOT: tl.constexpr):
    """(m_i, l_i, acc) after a tile of scores z (top: their row maxima, where unmasked), flash attention's update;
    none where ``skip`` is inf (its weights 0: no branch, so that the loop's loads stay pipelined)."""
    if MASKED:
        logit = tl.where(allowed, z + bias, float("-inf"))
        top = tl.max(logit, 1)
    else:
        logit = z
    m_new = tl.maximum(m_i, top - skip)
    shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row that has seen no key yet
    p = tl.exp2(logit - (shift + skip)[:, None])
    alpha = tl.exp2(m_i - shift)
    return m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None] + matmul(rounded(p, v.dtype, DOT), v, DOT)


@triton.jit
def euclid_forward(
    Q, K, V, M, QS, KS, OUT, STATS, TILES, s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd, s_vb, s_vh, s_vn, s_vd,
    s_mb, s_mh, s_mm, s_mn, heads, lq, lk, d_real, dv_real, neg2a, a, e2, b, row_near, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr,
    DOT: tl.constexpr, FOLD: tl.constexpr,
):  # fmt: skip
    """O = softmax(z + mask) V for BLOCK_M queries of one (batch, head), O contiguous (B * H, Lq, Dv). STATS (3,
    B * H, Lq): each row's log-sum-exp, largest logit and sum (0, 0 and 1 for a row that sees no key). TILES
    (B * H, query blocks + 1, key tiles + 1), uint8: 1 for each tile computed from the differences; the last column
    1 in a query block that had one, the last row in a key tile that was one in some block."""
    bh = tl.program_id(0).to(tl.int64)
    block = tl.program_id(1)
    start_m = block * BLOCK_M
    bat, head = bh // heads, bh % heads
    q_base = Q + bat * s_qb + head * s_qh + tl.cast(start_m, tl.int64) * s_qm
    k_base, v_base = K + bat * s_kb + head * s_kh, V + bat * s_vb + head * s_vh
    m_base = M + bat * s_mb + head * s_mh + tl.cast(start_m, tl.int64) * s_mm
    rows = tl.arange(0, BLOCK_M)
    rows_left = lq - start_m
    q = load_tile(q_base, rows, s_qm, s_qd, rows_left, d_real, BLOCK_D, True)
    qs = load_rows(QS + bh * lq + start_m, rows, rows_left, 1.0, True)
    near = row_near * (qs - b) + b  # squared distance below which the expansion's rounding shows (rows rule)
    z_flag = tl.where(rows < rows_left, score(tl.maximum(near, FLOOR + b), e2, FOLD), float("inf"))
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_DV), tl.float32)
    rare_any = 0
    key_tiles = tl.cdiv(lk, BLOCK_N)
    plane = TILES + bh * (tl.num_programs(1) + 1) * (key_tiles + 1)
    tiles, key_flags = plane + block * (key_tiles + 1), plane + tl.num_programs(1) * (key_tiles + 1)
    end = tl.minimum(lk, start_m + BLOCK_M) if CAUSAL else lk
    interior = (tl.minimum(start_m, lk) if CAUSAL else lk) // BLOCK_N * BLOCK_N
    ks_base = KS + bh * lk
    for phase in tl.static_range(2):  # the interior tiles, then those crossing an end or the diagonal
        if phase == 0:
            lo, hi = 0, interior
        else:
            lo, hi = interior, end
        for start_n in range(lo, hi, BLOCK_N):
            n = tl.cast(start_n, tl.int64)
            m_i, l_i, acc, rare_any = forward_tile(q, z_flag, m_i, l_i, acc, rare_any, q_base, s_qm, s_qd,
                                                   k_base + n * s_kn, s_kn, s_kd, v_base + n * s_vn, s_vn, s_vd,
                                                   m_base + n * s_mn, s_mm, s_mn, qs, ks_base + start_n,
                                                   tiles + start_n // BLOCK_N, key_flags + start_n // BLOCK_N,
                                                   start_m, start_n, rows_left, lk, d_real, dv_real, neg2a, a, e2,
                                                   BLOCK_M, BLOCK_N, BLOCK_D, BLOCK_DV, MASK, phase == 1,
                                                   CAUSAL and phase == 1, DOT, FOLD, False)
    if rare_any != 0:  # the marked tiles from the differences, in halves (fewer registers), every mask applied
        tl.debug_barrier()
        for start_n in range(0, end, BLOCK_N // 4):
            if tl.load(tiles + start_n // BLOCK_N) != 0:
                n = tl.cast(start_n, tl.int64)
                m_i, l_i, acc, rare_any = forward_tile(q, z_flag, m_i, l_i, acc, rare_any, q_base, s_qm, s_qd,
                                                       k_base + n * s_kn, s_kn, s_kd, v_base + n * s_vn, s_vn, s_vd,
                                                       m_base + n * s_mn, s_mm, s_mn, qs, ks_base + start_n, tiles,
                                                       key_flags, start_m, start_n, rows_left, lk, d_real, dv_real,
                                                       neg2a, a, e2, BLOCK_M, BLOCK_N // 4, BLOCK_D, BLOCK_DV, MASK,
                                                       True, CAUSAL, DOT, FOLD, True)
    seen = m_i > float("-inf")
    l_i = tl.where(seen, l_i, 1.0)
    m_i = tl.where(seen, m_i, 0.0)
    out = acc / l_i[:, None]  # a row that sees no key: 0 (NaN stays NaN)
    inside = rows < rows_left
    store_rows(OUT + (bh * lq + start_m) * dv_real, out, rows_left, dv_real, BLOCK_DV, DOT)
    stats = STATS + bh * lq + start_m + rows
    rows_all = tl.num_programs(0).to(tl.int64) * lq
    tl.store(stats, m_i + tl.log2(l_i), mask=inside)
    tl.store(stats + rows_all, m_i, mask=inside)
    tl.store(stats + 2 * rows_all, l_i, mask=inside)
    tl.store(tiles + key_tiles, rare_any)


# fmt: on
