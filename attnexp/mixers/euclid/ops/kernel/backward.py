"""Euclid's backward kernels, FA2-style: one pass over the (keys, queries) tiles computes each tile's weights, their
gradient and every product once, dK and dV in registers and dQ summed in float32 by atomic adds; before it,
rowsum(p * dp) for each query; after it, dQ in the inputs' dtype.

With ``g = p (dp - rowsum(p * dp)) z^2 / d`` (z^3 where eps is folded) and c = ln(2) a (see :mod:`.tiles`)::

    dq_i = c (sum_j g_ij k_j - (sum_j g_ij) q_i)        dk_j = c (sum_i g_ij q_i - (sum_i g_ij) k_j)

A tile the forward pass computed from the differences (TILES) is computed the same way here, and its near pairs
(within the rows rule's ROW_NEAR) take their terms g_ij (q_i - k_j) from the differences too, one query per key at a
time (:func:`near_terms`): through the sums above they would be lost to rounding. In a query block holding such a
tile, rowsum(p * dp) comes from the tiles' own weights, computed as here (where one weight holds the row the two
cancel exactly, and z^2 / d reaches 1/eps^3); elsewhere from dO . O, as flash attention's.
"""

from __future__ import annotations

import triton
import triton.language as tl

from attnexp.mixers.euclid.ops.kernel.tiles import (
    allowed_pairs,
    exact_scores,
    exact_squares,
    gradient_products,
    hot_factor,
    hot_scores,
    load_rows,
    load_tile,
    matmul,
    rounded,
    store_rows,
)


# Triton kernels take long argument lists: kept a few to a line.
# fmt: off
@triton.jit
def tile_weights(
    k, ks, K, s_kn, s_kd, q, qs, lse, Q, s_qm, s_qd, STATS, plane, M, s_mm, s_mn, keys_left, rows_left, diag, d_real,
    neg2a, a, e2, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, MASK: tl.constexpr, BOUNDS: tl.constexpr,
    DIAG: tl.constexpr, DOT: tl.constexpr, FOLD: tl.constexpr, RARE: tl.constexpr,
):  # fmt: skip
    """(p, pf, x) of a tile of keys (rows) and queries (columns): the weights, the weights times the gradient's
    factor z^2 / d and, where RARE (the tile computed from the differences), the exact squared distances (else the
    weights again). lse: the queries' log-sum-exp; K, Q, STATS, M: the tile's first key, query, statistic and mask
    entry.  # (BLOCK_N, BLOCK_M) each"""
    keys, queries = tl.arange(0, BLOCK_N), tl.arange(0, BLOCK_M)
    if RARE:
        x = exact_squares(K, keys, s_kn, keys_left, Q, queries, s_qm, rows_left, s_kd, s_qd, d_real, a, BLOCK_N, BLOCK_M
)
        z, d = exact_scores(x, e2)
        factor = tl.where(d > 0.0, tl.fdiv(z * z, d), 0.0)  # 0 where a key equals its query (and its term is 0)
        shift = load_rows(STATS + plane, queries, rows_left, 0.0, BOUNDS)  # the largest logit, the sum apart
    else:
        z = hot_scores(matmul(k, tl.trans(q), DOT), ks, qs, neg2a, e2, FOLD)
        factor = hot_factor(z, e2, FOLD)
        shift = lse
    if BOUNDS or DIAG or MASK != 0:
        m_ptrs = M + keys[:, None] * s_mn + queries[None, :] * s_mm
        allowed, bias = allowed_pairs(keys, queries, keys_left, rows_left, diag, m_ptrs, BOUNDS, DIAG, MASK, False)
        p = tl.where(allowed, tl.exp2(z + bias - shift[None, :]), 0.0)
    else:
        p = tl.exp2(z - shift[None, :])
    if RARE:
        p = p / load_rows(STATS + 2 * plane, queries, rows_left, 1.0, BOUNDS)[None, :]
    else:
        x = p
    return p, p * factor, x


@triton.jit
def near_terms(g, K, s_kn, s_kd, keys_left, Q, s_qm, s_qd, rows_left, DQ, DKX, d_real):
    """The near pairs' terms g_ij (q_i - k_j) from the differences (``g``: 0 but at the near pairs), one column of the
    head dimension at a time: summed over the queries into the key block's float32 rows DKX (for dK), and over the
    keys, negated, into the queries' rows of DQ (atomic). No (keys, head dim) block: few registers."""
    keys, queries = tl.arange(0, g.shape[0]), tl.arange(0, g.shape[1])
    for col in range(0, d_real):
        kc = tl.load(K + keys * s_kn + col * s_kd, mask=keys < keys_left, other=0.0).to(tl.float32)
        qc = tl.load(Q + queries * s_qm + col * s_qd, mask=queries < rows_left, other=0.0).to(tl.float32)
        term = g * (qc[None, :] - kc[:, None])
        tl.atomic_add(DQ + queries * d_real + col, -tl.sum(term, 0), mask=queries < rows_left, sem="relaxed")
        at = DKX + keys * d_real + col
        tl.store(at, tl.load(at, mask=keys < keys_left, other=0.0) + tl.sum(term, 1), mask=keys < keys_left)


@triton.jit
def backward_tile(
    dk, dv, cs, k, v, ks, q, do, qs, lse, delta, K, s_kn, s_kd, Q, s_qm, s_qd, STATS, plane, M, s_mm, s_mn, DQ, RS,
    DKX, keys_left, rows_left, diag, d_real, neg2a, a, e2, b, row_near, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_D: tl.constexpr, MASK: tl.constexpr, BOUNDS: tl.constexpr, DIAG: tl.constexpr, DOT: tl.constexpr,
    FOLD: tl.constexpr, RARE: tl.constexpr,
):  # fmt: skip
    """One query tile's share of a key block's gradients: (dk, dv, cs) updated (cs: the keys' sums of g), dQ's
    products and RS (the queries' sums of g) added to their float32 rows. Q, STATS, M, DQ, RS: the tile's first
    query's."""
    queries, cols = tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_D)
    p, pf, x = tile_weights(k, ks, K, s_kn, s_kd, q, qs, lse, Q, s_qm, s_qd, STATS, plane, M, s_mm, s_mn, keys_left,
                            rows_left, diag, d_real, neg2a, a, e2, BLOCK_N, BLOCK_M, MASK, BOUNDS, DIAG, DOT, FOLD, RARE
)
    dv += matmul(rounded(p, do.dtype, DOT), do, DOT)
    g = pf * (matmul(v, tl.trans(do), DOT) - delta[None, :])  # (N, M)
    if RARE:  # the near pairs' terms from the differences
        near = x <= row_near * (qs - b)[None, :]
        near_terms(tl.where(near, g, 0.0), K, s_kn, s_kd, keys_left, Q, s_qm, s_qd, rows_left, DQ, DKX, d_real)
        g = tl.where(near, 0.0, g)
    dk, dq, g = gradient_products(g, q, k, dk, DOT)
    cs += tl.sum(g, 1)
    inside = cols[None, :] < d_real
    if BOUNDS:
        inside = inside & (queries[:, None] < rows_left)
    tl.atomic_add(DQ + queries[:, None] * d_real + cols[None, :], dq, mask=inside, sem="relaxed")
    tl.atomic_add(RS + queries, tl.sum(g, 0), mask=queries < rows_left, sem="relaxed")
    return dk, dv, cs


@triton.jit
def query_tile(
    dk, dv, cs, k, v, ks, K, s_kn, s_kd, Q, s_qm, s_qd, DO, s_om, s_od, QS, DELTA, STATS, plane, M, s_mm, s_mn, DQ, RS,
    DKX, TILE, start_m, start_n, lq, keys_left, d_real, dv_real, neg2a, a, e2, b, row_near, BLOCK_N: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, MASK: tl.constexpr, BOUNDS: tl.constexpr,
    DIAG: tl.constexpr, DOT: tl.constexpr, FOLD: tl.constexpr, RARE: tl.constexpr,
):  # fmt: skip
    """:func:`backward_tile` of the query tile at ``start_m``: from the expansion unless the forward pass marked it
    (TILE), left for RARE, which computes it from the differences. Q, DO, QS, DELTA, STATS, M, DQ, RS: the (batch,
    head)'s first query's (M: the key block's first key's)."""
    at = tl.cast(start_m, tl.int64)
    Q, DO, M = Q + at * s_qm, DO + at * s_om, M + at * s_mm
    QS, DELTA, STATS, DQ, RS = QS + at, DELTA + at, STATS + at, DQ + at * d_real, RS + at
    rows_left, diag = lq - start_m, start_n - start_m
    queries = tl.arange(0, BLOCK_M)
    q = load_tile(Q, queries, s_qm, s_qd, rows_left, d_real, BLOCK_D, BOUNDS)
    do = load_tile(DO, queries, s_om, s_od, rows_left, dv_real, BLOCK_DV, BOUNDS)
    qs = load_rows(QS, queries, rows_left, 1.0, BOUNDS)
    lse = load_rows(STATS, queries, rows_left, float("inf"), BOUNDS)
    delta = load_rows(DELTA, queries, rows_left, 0.0, BOUNDS)
    skip = 0.0
    if not RARE:  # a tile the forward pass marked waits for its loop: weights 0 here (no branch: loads pipelined)
        skip = tl.where(tl.load(TILE) != 0, float("inf"), 0.0)
    dk, dv, cs = backward_tile(dk, dv, cs, k, v, ks, q, do, qs, lse + skip, delta, K, s_kn, s_kd, Q, s_qm, s_qd, STATS,
                               plane, M, s_mm, s_mn, DQ, RS, DKX, keys_left, rows_left, diag, d_real, neg2a, a, e2, b,
                               row_near, BLOCK_N, BLOCK_M, BLOCK_D, MASK, BOUNDS, DIAG, DOT, FOLD, RARE)
    return dk, dv, cs


@triton.jit
def query_ranges(start_n, lq, full, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr):
    """(first, inner, outer): a key block's query tiles are [first, lq); those in [inner, outer) need no mask (the
    others cross the causal diagonal or an end; all of them where the key block is not ``full``)."""
    first = 0
    inner = 0
    if CAUSAL:  # the queries from the keys' own on
        first = tl.minimum(start_n // BLOCK_M * BLOCK_M, lq)
        inner = tl.minimum(tl.cdiv(start_n + BLOCK_N, BLOCK_M) * BLOCK_M, lq)
    outer = tl.maximum(inner, lq // BLOCK_M * BLOCK_M)
    if not full:
        inner = first
        outer = first
    return first, inner, outer


@triton.jit
def key_block(
    Q, K, V, M, QS, KS, DO, STATS, TILES, DELTA, DQ, RS, s_qb, s_qh, s_kb, s_kh, s_kn, s_kd, s_vb, s_vh, s_vn, s_vd,
    s_mb, s_mh, s_mn, s_ob, s_oh, heads, lq, lk, d_real, dv_real, FWD_BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):  # fmt: skip
    """What both backward kernels start from for their key block: its keys, values and norms, the (batch, head)'s
    first query's pointers, the block's column of TILES (the flag of any tile from the differences: the last row)
    and its first row (B * H * Lk + first key)."""
    bh = tl.program_id(0).to(tl.int64)
    start_n = tl.program_id(1) * BLOCK_N
    bat, head = bh // heads, bh % heads
    k_tile = K + bat * s_kb + head * s_kh + tl.cast(start_n, tl.int64) * s_kn
    keys = tl.arange(0, BLOCK_N)
    keys_left = lk - start_n
    k = load_tile(k_tile, keys, s_kn, s_kd, keys_left, d_real, BLOCK_D, True)
    v = load_tile(V + bat * s_vb + head * s_vh + tl.cast(start_n, tl.int64) * s_vn, keys, s_vn, s_vd, keys_left,
                  dv_real, BLOCK_DV, True)
    ks = load_rows(KS + bh * lk + start_n, keys, keys_left, 1.0, True)
    key_tiles, query_blocks = tl.cdiv(lk, BLOCK_N), tl.cdiv(lq, FWD_BLOCK_M)
    tiles = TILES + bh * (query_blocks + 1) * (key_tiles + 1) + start_n // BLOCK_N
    rows = bh * lq
    return (start_n, keys_left, k, v, ks, k_tile, Q + bat * s_qb + head * s_qh, DO + bat * s_ob + head * s_oh,
            M + bat * s_mb + head * s_mh + tl.cast(start_n, tl.int64) * s_mn, QS + rows, DELTA + rows, STATS + rows,
            DQ + rows * d_real, RS + rows, tiles, tiles + query_blocks * (key_tiles + 1), key_tiles + 1,
            bh * lk + start_n)


@triton.jit
def euclid_backward(
    Q, K, V, M, QS, KS, DO, STATS, TILES, DELTA, DK, DV, DQ, RS, DKX, DVX, s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn,
    s_kd, s_vb, s_vh, s_vn, s_vd, s_mb, s_mh, s_mm, s_mn, s_ob, s_oh, s_om, s_od, heads, lq, lk, d_real, dv_real,
    neg2a, a, e2, b, row_near, FWD_BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr, DOT: tl.constexpr,
    FOLD: tl.constexpr, EXACT: tl.constexpr,
):  # fmt: skip
    """dK and dV of BLOCK_N keys of one (batch, head), in registers over every query tile that may see them, and
    dQ's share: products into DQ (float32, (B * H, Lq, D)) and sums of g into RS (B * H, Lq), by atomic adds. The
    key tiles are the forward pass's (its BLOCK_N), its query blocks (FWD_BLOCK_M) a multiple of BLOCK_M.

    The tiles the forward pass computed from the differences are left to a launch of their own (EXACT, run first:
    so that neither it nor the common tiles' loop holds the other's registers), for a key block that has some:
    computed the same way, every mask applied, their share of dK and dV (unscaled) into DKX and DVX (float32,
    contiguous (B * H, Lk, D)), which the common launch adds."""
    (start_n, keys_left, k, v, ks, k_tile, q_base, do_base, m_tile, qs, delta, stats, dq, rs, tiles, flag, step,
     out) = key_block(Q, K, V, M, QS, KS, DO, STATS, TILES, DELTA, DQ, RS, s_qb, s_qh, s_kb, s_kh, s_kn, s_kd, s_vb,
                      s_vh, s_vn, s_vd, s_mb, s_mh, s_mn, s_ob, s_oh, heads, lq, lk, d_real, dv_real, FWD_BLOCK_M,
                      BLOCK_N, BLOCK_D, BLOCK_DV)
    plane = tl.num_programs(0).to(tl.int64) * lq
    keys = tl.arange(0, BLOCK_N)
    dk = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_DV), tl.float32)
    cs = tl.zeros((BLOCK_N,), tl.float32)
    first, inner, outer = query_ranges(start_n, lq, keys_left >= BLOCK_N, BLOCK_N, BLOCK_M, CAUSAL)
    dkx, dvx, exact = DKX + out * d_real, DVX + out * dv_real, tl.load(flag) != 0
    if EXACT:
        if exact:
            store_rows(dkx, tl.zeros((BLOCK_N, BLOCK_D), tl.float32), keys_left, d_real, BLOCK_D, DOT)  # near terms
            tl.debug_barrier()
            for start_m in range(first, lq, BLOCK_M):
                tile = tiles + start_m // FWD_BLOCK_M * step
                if tl.load(tile) != 0:
                    dk, dv, cs = query_tile(dk, dv, cs, k, v, ks, k_tile, s_kn, s_kd, q_base, s_qm, s_qd, do_base,
                                            s_om, s_od, qs, delta, stats, plane, m_tile, s_mm, s_mn, dq, rs, dkx, tile,
                                            start_m, start_n, lq, keys_left, d_real, dv_real, neg2a, a, e2, b,
                                            row_near, BLOCK_N, BLOCK_M, BLOCK_D, BLOCK_DV, MASK, True, CAUSAL, DOT,
                                            FOLD, True)
            tl.debug_barrier()
            kf = load_tile(k_tile, keys, s_kn, s_kd, keys_left, d_real, BLOCK_D, True).to(tl.float32)
            store_rows(dkx, dk + load_tile(dkx, keys, d_real, 1, keys_left, d_real, BLOCK_D, True) - cs[:, None] * kf,
                       keys_left, d_real, BLOCK_D, DOT)
            store_rows(dvx, dv, keys_left, dv_real, BLOCK_DV, DOT)
    else:
        head_tiles = tl.cdiv(inner - first, BLOCK_M)
        for phase in tl.static_range(2):  # the tiles in [inner, outer), unmasked; then [first, inner), [outer, lq)
            if phase == 0:  # noqa: SIM108 (a conditional expression is not Triton syntax)
                count = tl.cdiv(outer - inner, BLOCK_M)
            else:
                count = head_tiles + tl.cdiv(lq - outer, BLOCK_M)
            for t in range(0, count):
                if phase == 0:
                    start_m = inner + t * BLOCK_M
                else:
                    start_m = tl.where(t < head_tiles, first + t * BLOCK_M, outer + (t - head_tiles) * BLOCK_M)
                dk, dv, cs = query_tile(dk, dv, cs, k, v, ks, k_tile, s_kn, s_kd, q_base, s_qm, s_qd, do_base, s_om,
                                        s_od, qs, delta, stats, plane, m_tile, s_mm, s_mn, dq, rs, dkx,
                                        tiles + start_m // FWD_BLOCK_M * step, start_m, start_n, lq, keys_left, d_real,
                                        dv_real, neg2a, a, e2, b, row_near, BLOCK_N, BLOCK_M, BLOCK_D, BLOCK_DV, MASK,
                                        phase == 1, CAUSAL and phase == 1, DOT, FOLD, False)
        dk = dk - cs[:, None] * load_tile(k_tile, keys, s_kn, s_kd, keys_left, d_real, BLOCK_D, True).to(tl.float32)
        if exact:
            dk += load_tile(dkx, keys, d_real, 1, keys_left, d_real, BLOCK_D, True)
            dv += load_tile(dvx, keys, dv_real, 1, keys_left, dv_real, BLOCK_DV, True)
        store_rows(DK + out * d_real, dk * (a * 0.6931471805599453), keys_left, d_real, BLOCK_D, DOT)  # c = ln(2) a
        store_rows(DV + out * dv_real, dv, keys_left, dv_real, BLOCK_DV, DOT)


# fmt: on
