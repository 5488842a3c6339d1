"""Euclid's Triton kernels launched: each launch (:class:`Launch`) built apart from running it, so that the operator
(:mod:`.operator`) runs it and :mod:`.offline` compiles it for a GPU without one; the tiles and warps every kernel
takes, and the score constants (see :mod:`.tiles`). Triton is imported only when a kernel is run or compiled.
"""

from __future__ import annotations

import importlib
import math
import os
from typing import NamedTuple

import torch
from torch import Tensor

from attnexp.mixers.euclid.formula import ROW_NEAR
from attnexp.mixers.euclid.ops.rows import FOLDED_EPS

FORWARD_M, FORWARD_WARPS = 64, 4  # the forward pass's query block and warps
KEYS = 64  # keys per tile, the same in every kernel: the backward passes compute the forward pass's tiles
QUERIES, BACKWARD_WARPS = 32, 4  # queries per backward tile (FORWARD_M a multiple of it) and warps
ROWS = 64  # rows per program of the kernels over rows (norms, dQ)
LN2 = math.log(2.0)
MODULES = {
    "forward": ("squared_norms", "euclid_forward"),
    "backward": ("euclid_backward",),
    "queries": ("euclid_backward_delta", "euclid_backward_queries"),
}


class Launch(NamedTuple):
    """One kernel launch: the kernel's name, its grid, its arguments and its compile-time ones (num_warps too)."""

    kernel: str
    grid: tuple[int, ...]
    args: tuple
    meta: dict
    label: str = ""  # where one kernel is launched twice, each launch's name


def interpreting() -> bool:
    """Whether Triton's interpreter is asked for (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def kernel(name: str) -> object:
    """The Triton kernel ``name``, its module imported (and Triton with it) on first use."""
    module = next(module for module, names in MODULES.items() if name in names)
    return getattr(importlib.import_module(f"attnexp.mixers.euclid.ops.kernel.{module}"), name)


def run(launches: list[Launch]) -> None:
    for launch in launches:
        kernel(launch.kernel)[launch.grid](*launch.args, **launch.meta)  # type: ignore[index]


def blocks(n: int, size: int) -> int:
    return -(-n // size)


def width(n: int) -> int:
    """The kernels' block width for a head dimension of n: a power of 2, at least 16 (``tl.dot``'s least)."""
    return max(16, 1 << (n - 1).bit_length())


def mask_args(mask: Tensor | None, q: Tensor, lk: int) -> tuple[Tensor, tuple[int, ...], int]:
    """The mask as the kernels read it (bool as uint8, a view) broadcast to (B, H, Lq, Lk), its strides and kind
    (0 none, 1 boolean, 2 additive)."""
    if mask is None:
        return q, (0, 0, 0, 0), 0
    full = mask.view(torch.uint8) if mask.dtype == torch.bool else mask
    full = full.reshape((1,) * (4 - full.dim()) + tuple(full.shape)).expand(q.shape[0], q.shape[1], q.shape[2], lk)
    return full, tuple(full.stride()), 1 if mask.dtype == torch.bool else 2


class Scores(NamedTuple):
    """The kernels' score constants (see :mod:`.tiles`): x = a ||q - k||^2 + b, z = rsqrt(x) where eps is folded."""

    neg2a: float
    a: float
    e2: float
    b: float
    fold: bool


def scores(scale: float, eps: float) -> Scores:
    a, e2 = scale * scale * LN2 * LN2, eps * LN2
    fold = e2 <= FOLDED_EPS  # 1/sqrt(d^2 + eps^2) is 1/(d + eps) to rounding for every pair the expansion gives
    return Scores(-2.0 * a, a, e2, e2 * e2 if fold else 0.0, fold)


class Call(NamedTuple):
    """An attention call as the kernels take it: (B, H, L, D) inputs of one dtype, the mask, the causal flag."""

    q: Tensor
    k: Tensor
    v: Tensor
    mask: Tensor | None
    causal: bool
    scores: Scores


class Saved(NamedTuple):
    """What the forward pass leaves the backward pass (the operator's outputs) and the rows' norms (float32)."""

    out: Tensor  # (B, H, Lq, Dv)
    stats: Tensor  # (3, B * H, Lq)
    tiles: Tensor  # (B * H, query blocks + 1, key tiles + 1), uint8
    qs: Tensor  # (B * H, Lq)
    ks: Tensor  # (B * H, Lk)


class Work(NamedTuple):
    """The backward pass's float32 memory and the gradients it writes (contiguous, in the inputs' dtypes)."""

    delta: Tensor  # (B * H, Lq) rowsum(p * dp)
    sums: Tensor  # (B * H, Lq, D) dQ's products, zeros first
    row_sums: Tensor  # (B * H, Lq) g's sums, zeros first
    exact_dk: Tensor  # (B * H, Lk, D) the exact tiles' share of dK
    exact_dv: Tensor  # (B * H, Lk, Dv) and of dV
    dq: Tensor
    dk: Tensor
    dv: Tensor


def common(call: Call) -> tuple[tuple, dict]:
    """The inputs, strides and sizes every attention kernel takes first, and its compile-time arguments."""
    q, k, v, mask, causal, s = call
    m, m_strides, kind = mask_args(mask, q, k.shape[2])
    sizes = (q.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3])
    strides = (*q.stride(), *k.stride(), *v.stride(), *m_strides)
    dot = 2 if interpreting() else int(q.dtype == torch.float32)
    meta = dict(BLOCK_D=width(q.shape[3]), BLOCK_DV=width(v.shape[3]), MASK=kind, CAUSAL=causal, DOT=dot, FOLD=s.fold)
    return (q, k, v, m), (strides, sizes), meta


def norms(x: Tensor, out: Tensor, s: Scores, plus: float) -> Launch:
    """s.a ||x||^2 + plus for each row of a (B, H, L, D) x into out (B * H, L)."""
    b, h, n, d = x.shape
    return Launch(
        "squared_norms",
        (b * h, blocks(n, ROWS)),
        (x, out, *x.stride(), h, n, d, s.a, plus),
        dict(BLOCK_R=ROWS, BLOCK_D=width(d), num_warps=4),
    )


def forward_plan(call: Call, saved: Saved) -> list[Launch]:
    inputs, (strides, sizes), meta = common(call)
    b, h, lq, _ = call.q.shape
    s = call.scores
    return [
        norms(call.q, saved.qs, s, s.b),
        norms(call.k, saved.ks, s, 0.0),
        Launch(
            "euclid_forward",
            (b * h, blocks(lq, FORWARD_M)),
            (*inputs, saved.qs, saved.ks, *saved[:3], *strides, *sizes, s.neg2a, s.a, s.e2, s.b, ROW_NEAR),
            dict(meta, BLOCK_M=FORWARD_M, BLOCK_N=KEYS, num_warps=FORWARD_WARPS),
        ),
    ]


def backward_plan(call: Call, saved: Saved, dout: Tensor, work: Work) -> list[Launch]:
    inputs, (strides, sizes), meta = common(call)
    b, h, lq, d = call.q.shape
    s = call.scores
    grads = (*strides, *dout.stride(), *sizes, s.neg2a, s.a, s.e2)
    shared = dict(meta, FWD_BLOCK_M=FORWARD_M, BLOCK_N=KEYS, BLOCK_M=QUERIES, num_warps=BACKWARD_WARPS)
    halves = dict(shared, BLOCK_M=QUERIES // 2, num_warps=8)  # tiles from the differences: half the query tiles
    row_norms = (saved.qs, saved.ks)
    backward = (*inputs, *row_norms, dout, saved.stats, saved.tiles, work.delta, work.dk, work.dv, work.sums,
                work.row_sums, work.exact_dk, work.exact_dv, *grads, s.b, ROW_NEAR)  # fmt: skip
    keys = (b * h, blocks(call.k.shape[2], KEYS))
    return [
        norms(call.q, saved.qs, s, s.b),
        norms(call.k, saved.ks, s, 0.0),
        Launch(
            "euclid_backward_delta",
            (b * h, blocks(lq, QUERIES // 2)),
            (*inputs, *row_norms, saved.out, dout, saved.stats, saved.tiles, work.delta, *grads),
            halves,
        ),
        Launch("euclid_backward", keys, backward, dict(halves, EXACT=True), "euclid_backward_exact"),
        Launch("euclid_backward", keys, backward, dict(shared, EXACT=False)),
        Launch(
            "euclid_backward_queries",
            (b * h, blocks(lq, ROWS)),
            (call.q, work.sums, work.row_sums, work.dq, *call.q.stride(), h, lq, d, s.a),
            dict(BLOCK_M=ROWS, BLOCK_D=width(d), DOT=meta["DOT"], num_warps=4),
        ),
    ]
