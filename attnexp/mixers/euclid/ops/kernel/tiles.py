"""The tile arithmetic euclid's Triton kernels share (:mod:`.forward`, :mod:`.backward`): loading blocks, the products
in each precision, the scores from the expansion and, in the tiles that need them, from the differences.

Scores are in base 2 with scale and eps folded in by the operator: ``x = a ||q - k||^2 (+ b)`` with ``a`` the scale
squared times ln(2)^2 and ``b = (eps ln 2)^2`` where eps is folded (FOLD), so that ``rsqrt(x)`` is log2(e) times
euclid's score 1/sqrt(d^2 + eps^2), equal to 1/(d + eps) to float32 rounding for every pair a tile computes from the
expansion (see :func:`hot_scores`). A tile holding a pair closer than the rows rule's threshold (or a score above
:data:`FLOOR`'s) takes every pair from the differences, summed over the head dimension in one order
(:func:`exact_squares`): the same bits in every kernel, whichever way round it holds the tile.
"""

from __future__ import annotations

import triton
import triton.language as tl

# Squared base-2 distance below which a row needs its exact path: a score above 64 (2^-12 = 1/64^2, the CPU path's
# EXP_SAFE), where eps is no longer below rounding of the distance and the gradient's factor z^3 is large.
FLOOR = tl.constexpr(2.0**-12)


# Triton kernels take long argument lists: kept a few to a line.
# fmt: off
@triton.jit
def load_tile(base, rows, s_row, s_col, n_rows, n_cols, BLOCK_C: tl.constexpr, BOUNDS: tl.constexpr):
    """The rows ``rows`` of a (n_rows, n_cols) matrix at ``base`` (a tile's first row: int32 offsets within it),
    zeros past its ends (checked only where BOUNDS, and for columns where the block is wider than the matrix).
    # (len(rows), BLOCK_C)"""
    cols = tl.arange(0, BLOCK_C)
    ptrs = base + rows[:, None] * s_row + cols[None, :] * s_col
    if BOUNDS:
        tile = tl.load(ptrs, mask=(rows[:, None] < n_rows) & (cols[None, :] < n_cols), other=0.0)
    else:
        tile = tl.load(ptrs, mask=cols[None, :] < n_cols, other=0.0)
    return tile


@triton.jit
def rounded(x, dtype: tl.constexpr, DOT: tl.constexpr):
    """x in ``dtype``, rounded to nearest as a GPU rounds (Triton 3.8's interpreter, DOT 2, truncates float32 to
    bf16: a bias of 2^-9 that summed products show; there the rounding is done on the bits)."""
    if DOT == 2 and dtype == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        r = bits.to(tl.float32, bitcast=True).to(dtype)
    else:
        r = x.to(dtype)
    return r


@triton.jit
def store_rows(base, x, n_rows, n_cols, BLOCK_C: tl.constexpr, DOT: tl.constexpr):
    """x (R, BLOCK_C) into the first rows of a contiguous (., n_cols) matrix at ``base``, in its dtype, up to
    n_rows."""
    rows, cols = tl.arange(0, x.shape[0]), tl.arange(0, BLOCK_C)
    tl.store(base + rows[:, None] * n_cols + cols[None, :], rounded(x, base.dtype.element_ty, DOT),
             mask=(rows[:, None] < n_rows) & (cols[None, :] < n_cols))


@triton.jit
def load_rows(base, rows, n_rows, other, BOUNDS: tl.constexpr):
    """One value per row (norms, statistics), ``other`` past the end where BOUNDS (norms: 1, so that padding scores
    stay finite).  # (len(rows),)"""
    if BOUNDS:  # noqa: SIM108 (a conditional expression is not Triton syntax)
        r = tl.load(base + rows, mask=rows < n_rows, other=other)
    else:
        r = tl.load(base + rows)
    return r


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
def gradient_products(g, q, k, dk, DOT: tl.constexpr):
    """(dk + g @ q, g^T @ k, g as multiplied) for float32 gradient weights g (keys, queries) of q and k blocks: bf16
    blocks as two bf16 products, g's bf16 rounding and the rest (~16 bits, as float32 would give to ~1e-5; one
    product left g 2^-9 off, 2.4 times the CPU path's error in bf16); fp16 blocks as tf32 (fp16's mantissa, float32's
    range: the factor z^3 can pass fp16's); float32 in full. The sums of g that go with them are to be taken from
    the g returned (the numbers multiplied), so that each pair's term g_ij (k_j - q_i) stays whole."""
    if q.dtype == tl.bfloat16:  # (the interpreter too, DOT 2: its products in float32 of the same bf16 numbers)
        hi = rounded(g, tl.bfloat16, DOT)
        lo = rounded(g - hi.to(tl.float32), tl.bfloat16, DOT)
        if DOT == 0:
            dk = tl.dot(lo, q, tl.dot(hi, q, dk))
            dq = tl.dot(tl.trans(lo), k, tl.dot(tl.trans(hi), k))
        else:
            dk += matmul(hi, q, DOT) + matmul(lo, q, DOT)
            dq = matmul(tl.trans(hi), k, DOT) + matmul(tl.trans(lo), k, DOT)
        g = hi.to(tl.float32) + lo.to(tl.float32)
    elif DOT != 0:
        dk += matmul(g, q, DOT)
        dq = matmul(tl.trans(g), k, DOT)
    else:
        dk = tl.dot(g, q.to(tl.float32), dk, input_precision="tf32")
        dq = tl.dot(tl.trans(g), k.to(tl.float32), input_precision="tf32")
    return dk, dq, g


@triton.jit
def hot_scores(s, row_sq, col_sq, neg2a, e2, FOLD: tl.constexpr):
    """Base-2 scores of a tile from its products ``s`` and the norms (a ||.||^2, b in one of them): rsqrt(|x|) where
    eps is folded into x (|x| at least b = e2^2: finite), else 1/(sqrt(|x|) + e2). |x|: a pair the expansion takes
    below 0 scores high, so its tile goes to the exact path (and a NaN stays NaN).  # (R, C)"""
    x = tl.abs(s * neg2a + (row_sq[:, None] + col_sq[None, :]))
    if FOLD:
        x = tl.maximum(x, e2 * e2)
    return score(x, e2, FOLD)


@triton.jit
def score(x, e2, FOLD: tl.constexpr):
    """The base-2 score of a squared distance x >= 0 from the expansion: rsqrt(x) where x holds eps^2 (FOLD), else
    1/(sqrt(x) + e2)."""
    if FOLD:  # noqa: SIM108 (a conditional expression is not Triton syntax)
        z = tl.math.rsqrt(x)
    else:
        z = tl.fdiv(1.0, tl.sqrt(x) + e2)
    return z


@triton.jit
def hot_factor(z, e2, FOLD: tl.constexpr):
    """z^2 / d, the gradient's factor (d the base-2 distance): z^3 where z = x^-1/2.  # (R, C)"""
    if FOLD:
        f = z * z * z
    else:
        d = tl.fdiv(1.0, z) - e2
        f = tl.where(d > 0.0, tl.fdiv(z * z, d), 0.0)
    return f


@triton.jit
def exact_squares(
    r_base, r_rows, s_r, n_r, c_base, c_rows, s_c, n_c, s_rd, s_cd, d_real, a, BLOCK_R: tl.constexpr,
    BLOCK_C: tl.constexpr,
):  # fmt: skip
    """a ||c_j - r_i||^2 of every pair of a tile from the differences, in float32, summed over the head dimension
    in order, one column at a time: the same bits wherever the tile is computed and whichever side is its rows.
    # (BLOCK_R, BLOCK_C)"""
    acc = tl.zeros((BLOCK_R, BLOCK_C), tl.float32)
    for col in range(0, d_real):
        r = tl.load(r_base + r_rows * s_r + col * s_rd, mask=r_rows < n_r, other=0.0).to(tl.float32)
        c = tl.load(c_base + c_rows * s_c + col * s_cd, mask=c_rows < n_c, other=0.0).to(tl.float32)
        diff = c[None, :] - r[:, None]
        acc += diff * diff
    return acc * a


@triton.jit
def exact_scores(x, e2):
    """(z, d): base-2 scores 1/(d + e2) of exact squared distances x, and d = sqrt(x).  # (R, C) each"""
    d = tl.sqrt(x)
    return tl.fdiv(1.0, d + e2), d


@triton.jit
def allowed_pairs(
    rows, cols, n_rows, n_cols, shift, m_ptrs, BOUNDS: tl.constexpr, DIAG: tl.constexpr, MASK: tl.constexpr,
    QUERY_ROWS: tl.constexpr,
):  # fmt: skip
    """(allowed, bias): the pairs a query may attend in a tile and the additive mask in base 2 (0 without one).
    rows, cols: the tile's indices from its first row and column, n_rows, n_cols: how many are inside. BOUNDS: the
    tile crosses an end; DIAG: the causal diagonal crosses it (``shift``: the tile's first key less its first query);
    MASK 1 boolean, 2 additive (``m_ptrs``: the mask's entries for the tile). QUERY_ROWS: the tile's rows are
    queries, else keys.  # (R, C) each"""
    allowed = (rows[:, None] >= 0) & (cols[None, :] >= 0)
    if BOUNDS:
        allowed = allowed & (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    if DIAG:
        if QUERY_ROWS:
            allowed = allowed & (rows[:, None] >= cols[None, :] + shift)
        else:
            allowed = allowed & (cols[None, :] >= rows[:, None] + shift)
    bias = tl.zeros(allowed.shape, tl.float32)
    if MASK == 1:
        allowed = allowed & (tl.load(m_ptrs, mask=allowed, other=0) != 0)
    if MASK == 2:
        bias = tl.load(m_ptrs, mask=allowed, other=0.0).to(tl.float32) * 1.4426950408889634
        allowed = allowed & (bias > float("-inf"))
    return allowed, bias


# fmt: on
