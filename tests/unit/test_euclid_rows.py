"""Euclid on a CPU outside a compiled graph (the fused path's ``ops/rows.py``, and the explicit formula): the rows
needing exact distances found by reading the data, recomputed whole (more keys near a query than two, and norms far
from the origin, stay at rounding level), and each row decided on its own numbers (the same bits whatever the rest
of the batch holds; a NaN stays in its row)."""

from __future__ import annotations

import runpy

import pytest
import torch
from helpers import REPO

from attnexp.mixers.euclid.formula import euclid_score
from attnexp.mixers.euclid.ops.fused import fused_euclid_attention
from attnexp.mixers.multihead import attention

EPS = 1e-9
PATHS = {
    "fused": fused_euclid_attention,
    "explicit": lambda q, k, v, mask, scale, eps: attention(euclid_score(q, k, scale, eps, mask), v, mask)[0],
}


def reference(q, k, v, eps=EPS):
    """The formula in float64, distances from the differences (the square root's gradient 0 at 0)."""
    squared = (q.double().unsqueeze(-2) - k.double().unsqueeze(-3)).square().sum(-1)
    distance = torch.where(squared > 0, squared.clamp_min(1e-300).sqrt(), 0.0)
    return (1.0 / (distance * q.shape[-1] ** -0.5 + eps)).softmax(-1) @ v.double()


# The near-key cases of scripts/euclid_accuracy.py (its table), built once there
CASES = runpy.run_path(str(REPO / "scripts" / "euclid_accuracy.py"), run_name="imported_by_tests")
competing = CASES["competing"]


def offset(delta):
    """Two keys within delta and 2 delta of each query, every vector moved by 20 along each axis (norms ~80)."""
    return CASES["near_pairs"](delta, 20.0)


@pytest.mark.parametrize(
    "case", [competing(1e-4), competing(1e-6), offset(1e-2), offset(1e-6)], ids=["4 near 1e-4", "4 near 1e-6",
                                                                                   "offset 1e-2", "offset 1e-6"]
)  # fmt: skip
@pytest.mark.parametrize("path", PATHS)
def test_every_near_key_and_far_norms_stay_at_rounding_level(case, path):
    """Where two keys per query are recomputed (the fixed-shape path), four keys within 1e-4 of a query gave outputs
    off by 1.1 (the expansion chose the wrong two), and norms of 80 gradients off by 1.6e-5 to 1.3."""
    q, k, v = (t.clone().requires_grad_() for t in case)
    out = PATHS[path](q, k, v, None, 16**-0.5, EPS)
    want = reference(q, k, v)
    grad = torch.randn(want.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    got = (out, *torch.autograd.grad(out, (q, k, v), grad.float()))
    wanted = (want, *torch.autograd.grad(want, (q, k, v), grad))
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, wanted):
        assert (a.double() - b).abs().max() <= 2e-6 * b.abs().max(), name


@pytest.mark.parametrize("path", PATHS)
def test_each_row_is_decided_on_its_own_numbers(path):
    """An example gives the same bits alone and beside others: one with rows computed exactly (keys equal to their
    query) and one with a NaN, which stays in its own row. (One decision for the whole batch changed the other rows'
    arithmetic, and a NaN could turn the exact rows off for everyone.)"""
    torch.manual_seed(4)
    q, k, v = (torch.randn(3, 2, 12, 8) for _ in range(3))
    k[1, :, :6] = q[1, :, :6]  # exact rows in the second example
    q[2, 0, 5, 3] = float("nan")  # a NaN in the third
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    grad = torch.randn(3, 2, 12, 8)
    together = PATHS[path](q, k, v, None, 8**-0.5, EPS)
    grads = torch.autograd.grad(together, (q, k, v), grad)
    for i in range(3):
        alone_in = [t[i : i + 1].detach().requires_grad_() for t in (q, k, v)]
        alone = PATHS[path](*alone_in, None, 8**-0.5, EPS)
        alone_grads = torch.autograd.grad(alone, alone_in, grad[i : i + 1])
        for a, b in zip((together[i : i + 1], *(g[i : i + 1] for g in grads)), (alone, *alone_grads)):
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    nan_rows = together[2].isnan().any(-1)
    assert nan_rows[0, 5] and nan_rows.sum() == 1 and torch.isfinite(together[:2]).all()


def test_a_call_in_inference_mode_leaves_no_memory_a_later_call_outside_it_cannot_write():
    """The CPU path keeps its scratch memory between calls: made under inference mode (a prediction), it must still
    take the writes of a later call outside it (training, a check) in the same process."""
    q, k, v = (torch.randn(2, 2, 5, 4) for _ in range(3))
    mask = torch.ones(5, 5, dtype=torch.bool)
    with torch.inference_mode():
        first = fused_euclid_attention(q, k, v, mask, 0.5, 1e-6)
    with torch.no_grad():
        again = fused_euclid_attention(q, k, v, mask, 0.5, 1e-6)
    torch.testing.assert_close(again, first.clone(), rtol=0, atol=0)
