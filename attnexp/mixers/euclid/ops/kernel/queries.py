"""The backward pass's kernels over query blocks, before and after :func:`~.backward.euclid_backward`: each row's
rowsum(p * dp), and dQ from its float32 sums."""

from __future__ import annotations

import triton
import triton.language as tl

from attnexp.mixers.euclid.ops.kernel.backward import tile_weights
from attnexp.mixers.euclid.ops.kernel.tiles import load_rows, load_tile, matmul, store_rows


# Triton kernels take long argument lists: kept a few to a line.
# fmt: off
@triton.jit
def delta_tile(
    delta, q, qs, lse, do, Q, s_qm, s_qd, K, s_kn, s_kd, V, s_vn, s_vd, KS, STATS, plane, M, s_mm, s_mn, TILE, start_m,
    start_n, lk, rows_left, d_real, dv_real, neg2a, a, e2, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr, MASK: tl.constexpr, BOUNDS: tl.constexpr, DIAG: tl.constexpr,
    DOT: tl.constexpr, FOLD: tl.constexpr, RARE: tl.constexpr,
):  # fmt: skip
    """delta plus one key tile's sum of p * dp per query, from the tile as the backward pass computes it (its
    orientation, products and weights): from the expansion unless the forward pass marked it (TILE), left for RARE,
    from the differences. K, V, KS, M: the tile's."""
    skip = 0.0
    if not RARE:  # a tile the forward pass marked waits for its loop: weights 0 here (no branch: loads pipelined)
        skip = tl.where(tl.load(TILE) != 0, float("inf"), 0.0)
    keys = tl.arange(0, BLOCK_N)
    keys_left = lk - start_n
    k = load_tile(K, keys, s_kn, s_kd, keys_left, d_real, BLOCK_D, BOUNDS)
    v = load_tile(V, keys, s_vn, s_vd, keys_left, dv_real, BLOCK_DV, BOUNDS)
    ks = load_rows(KS, keys, keys_left, 1.0, BOUNDS)
    p, _f, _x = tile_weights(k, ks, K, s_kn, s_kd, q, qs, lse + skip, Q, s_qm, s_qd, STATS, plane, M, s_mm, s_mn,
                             keys_left, rows_left, start_n - start_m, d_real, neg2a, a, e2, BLOCK_N, BLOCK_M, MASK,
                             BOUNDS, DIAG, DOT, FOLD, RARE)
    delta += tl.sum(p * matmul(v, tl.trans(do), DOT), 0)
    return delta


@triton.jit
def euclid_backward_delta(
    Q, K, V, M, QS, KS, OUT, DO, STATS, TILES, DELTA, s_qb, s_qh, s_qm, s_qd, s_kb, s_kh, s_kn, s_kd, s_vb, s_vh, s_vn,
    s_vd, s_mb, s_mh, s_mm, s_mn, s_ob, s_oh, s_om, s_od, heads, lq, lk, d_real, dv_real, neg2a, a, e2,
    FWD_BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr, DOT: tl.constexpr, FOLD: tl.constexpr,
):  # fmt: skip
    """rowsum(p * dp) of BLOCK_M queries of one (batch, head) into DELTA (B * H, Lq): from the tiles' weights in a
    forward block that had a tile computed from the differences, else dO . O (OUT contiguous, DO with its strides)."""
    bh = tl.program_id(0).to(tl.int64)
    start_m = tl.program_id(1) * BLOCK_M
    at = tl.cast(start_m, tl.int64)
    bat, head = bh // heads, bh % heads
    queries = tl.arange(0, BLOCK_M)
    rows_left = lq - start_m
    do = load_tile(DO + bat * s_ob + head * s_oh + at * s_om, queries, s_om, s_od, rows_left, dv_real, BLOCK_DV, True)
    key_tiles = tl.cdiv(lk, BLOCK_N)
    tiles = TILES + (bh * (tl.cdiv(lq, FWD_BLOCK_M) + 1) + start_m // FWD_BLOCK_M) * (key_tiles + 1)
    if tl.load(tiles + key_tiles) != 0:
        q_tile = Q + bat * s_qb + head * s_qh + at * s_qm
        k_base, v_base = K + bat * s_kb + head * s_kh, V + bat * s_vb + head * s_vh
        m_tile = M + bat * s_mb + head * s_mh + at * s_mm
        q = load_tile(q_tile, queries, s_qm, s_qd, rows_left, d_real, BLOCK_D, True)
        qs = load_rows(QS + bh * lq + start_m, queries, rows_left, 1.0, True)
        stats, plane = STATS + bh * lq + start_m, tl.num_programs(0).to(tl.int64) * lq
        lse = load_rows(stats, queries, rows_left, float("inf"), True)
        delta = tl.zeros((BLOCK_M,), tl.float32)
        end = tl.minimum(lk, start_m + BLOCK_M) if CAUSAL else lk
        for start_n in range(0, end, BLOCK_N):  # every tile masked: this runs only in blocks with exact tiles
            n = tl.cast(start_n, tl.int64)
            delta = delta_tile(delta, q, qs, lse, do, q_tile, s_qm, s_qd, k_base + n * s_kn, s_kn, s_kd,
                               v_base + n * s_vn, s_vn, s_vd, KS + bh * lk + start_n, stats, plane, m_tile + n * s_mn,
                               s_mm, s_mn, tiles + start_n // BLOCK_N, start_m, start_n, lk, rows_left, d_real, dv_real,
                               neg2a, a, e2, BLOCK_N, BLOCK_M, BLOCK_D, BLOCK_DV, MASK, True, CAUSAL, DOT, FOLD, False)
        for start_n in range(0, end, BLOCK_N):
            if tl.load(tiles + start_n // BLOCK_N) != 0:
                n = tl.cast(start_n, tl.int64)
                delta = delta_tile(delta, q, qs, lse, do, q_tile, s_qm, s_qd, k_base + n * s_kn, s_kn, s_kd,
                                   v_base + n * s_vn, s_vn, s_vd, KS + bh * lk + start_n, stats, plane,
                                   m_tile + n * s_mn, s_mm, s_mn, tiles + start_n // BLOCK_N, start_m, start_n, lk,
                                   rows_left, d_real, dv_real, neg2a, a, e2, BLOCK_N, BLOCK_M, BLOCK_D, BLOCK_DV, MASK,
                                   True, CAUSAL, DOT, FOLD, True)
    else:
        out = OUT + (bh * lq + start_m) * dv_real
        o = load_tile(out, queries, dv_real, 1, rows_left, dv_real, BLOCK_DV, True)
        delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)
    tl.store(DELTA + bh * lq + start_m + queries, delta, mask=queries < rows_left)


@triton.jit
def euclid_backward_queries(
    Q, DQ_SUMS, RS, DQ, s_qb, s_qh, s_qm, s_qd, heads, lq, d_real, a, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr,
    DOT: tl.constexpr,
):  # fmt: skip
    """dQ = c (sum_j g_ij k_j - (sum_j g_ij) q_i) of BLOCK_M queries, c = ln(2) a, from the float32 sums the backward
    pass added (DQ_SUMS (B * H, Lq, D), RS (B * H, Lq)); DQ contiguous, in the inputs' dtype."""
    bh = tl.program_id(0).to(tl.int64)
    start_m = tl.program_id(1) * BLOCK_M
    rows = tl.arange(0, BLOCK_M)
    rows_left = lq - start_m
    at = bh * lq + start_m
    q = load_tile(Q + (bh // heads) * s_qb + (bh % heads) * s_qh + tl.cast(start_m, tl.int64) * s_qm, rows, s_qm, s_qd,
                  rows_left, d_real, BLOCK_D, True).to(tl.float32)
    sums = load_tile(DQ_SUMS + at * d_real, rows, d_real, 1, rows_left, d_real, BLOCK_D, True)
    rs = load_rows(RS + at, rows, rows_left, 0.0, True)
    dq = (sums - rs[:, None] * q) * (a * 0.6931471805599453)
    store_rows(DQ + at * d_real, dq, rows_left, d_real, BLOCK_D, DOT)


# fmt: on
