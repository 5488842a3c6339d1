"""Euclid under torch.compile and torch.export on the CPU: forward and backward in one graph (the fixed-shape
function; eager runs the rows function) with the eager numbers, and float32 distances under bf16 autocast."""

from __future__ import annotations

import pytest
import torch

from attnexp.mixers import EuclidAttention
from attnexp.mixers.euclid.ops import tiles


@pytest.mark.parametrize("path", ["explicit", "fused"])
@pytest.mark.parametrize("length", [16, 256], ids=["weights-kept", "tiled"])
def test_forward_and_backward_compile_as_one_graph(length, path, monkeypatch):
    """torch.compile(fullgraph=True) traces the path's forward and backward (aot_eager: the backward graph too, and
    no code generated) with no graph break, and gives the eager numbers; torch.export traces the forward."""
    monkeypatch.setattr(tiles, "CPU_TILE_SCORES", 1 << 14)  # the tiled run: several tiles of 256 x 256 scores
    torch.manual_seed(8)
    attn = EuclidAttention(16, heads=2, path=path)
    x = torch.randn(1, length, 16, requires_grad=True)
    padding = torch.ones(1, 1, 1, length, dtype=torch.bool)
    padding[..., -3:] = False
    grad = torch.randn(1, length, 16)
    results = []
    for module in (attn, torch.compile(attn, backend="aot_eager", fullgraph=True)):
        out = module(x, mask=padding)[0]
        results.append((out, *torch.autograd.grad(out, (x, *attn.parameters()), grad)))
    for compiled, eager in zip(*results):
        torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-4)
    exported = torch.export.export(attn, (x.detach(),), {"mask": padding})
    torch.testing.assert_close(
        exported.module()(x.detach(), mask=padding)[0], results[0][0].detach(), atol=1e-5, rtol=1e-4
    )


@pytest.mark.parametrize("length", [16, 256], ids=["weights-kept", "tiled"])
def test_the_fused_path_compiles_under_autocast(length, monkeypatch):
    """Under bf16 autocast the compiled backward pass keeps its distances float32, as the eager one does (the traced
    backward ran its matmuls in bf16 and failed on mixed dtypes). Compiled, the fixed-shape function runs; eager,
    the CPU's rows function: the two agree to bf16's rounding of the weights and values (1% of the largest)."""
    monkeypatch.setattr(tiles, "CPU_TILE_SCORES", 1 << 14)
    torch.manual_seed(8)
    attn = EuclidAttention(16, heads=2, path="fused")
    x = torch.randn(1, length, 16, requires_grad=True)
    grad = torch.randn(1, length, 16)
    results = []
    for module in (attn, torch.compile(attn, backend="aot_eager", fullgraph=True)):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = module(x)[0]
        results.append((out, *torch.autograd.grad(out, (x, *attn.parameters()), grad.to(out.dtype))))
    for compiled, eager in zip(*results):
        assert compiled.dtype == eager.dtype
        assert (compiled - eager).abs().max() <= 1e-2 * eager.abs().max()
