"""Euclid's Triton kernel on CUDA with its default tiles: what only a GPU shows. No host read, bf16 under autocast
against float64, one graph through inductor with the eager numbers, memory O(L), near keys across many tiles.
(test_euclid_kernel_cases.py runs the unit tier's checks here.)"""

from __future__ import annotations

import pytest
import torch
from euclid_kernel_cases import reference

from attnexp.mixers import EuclidAttention
from attnexp.mixers.euclid.ops.kernel.operator import triton_euclid_attention

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]


def relative(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.double().cpu() - want.cpu()).abs().max() / want.abs().max().clamp_min(1e-12)).item()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_no_host_read_and_bf16_at_length_1024(causal):
    """Forward and backward under bf16 autocast inside ``set_sync_debug_mode("error")`` (a host read raises), with a
    padding mask, against float64 on the CPU from the same bf16-rounded inputs. Under the interpreter (L = 96) the
    kernel measured 0.007 in the output and 0.05 in the gradients (the first causal rows), the CPU path (float32
    distances on bf16 inputs) 0.006 and 0.097."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 1024, 64, device="cuda", requires_grad=True) for _ in range(3))
    keep = torch.ones(2, 1, 1, 1024, dtype=torch.bool, device="cuda")
    keep[1, ..., 700:] = False
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = triton_euclid_attention(q, k, v, keep, causal)
        grads = torch.autograd.grad(out.float().square().sum(), (q, k, v))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    rounded = [t.detach().bfloat16().double().cpu().requires_grad_() for t in (q, k, v)]
    want = reference(*rounded, keep.cpu(), causal)
    wanted = torch.autograd.grad(want.square().sum(), rounded)
    assert out.dtype == torch.bfloat16 and relative(out, want) <= 3e-2
    assert max(relative(g, w) for g, w in zip(grads, wanted)) <= 1e-1


def test_the_mixer_compiles_to_one_graph_through_inductor_with_the_eager_numbers():
    """torch.compile(fullgraph=True) with inductor (Triton on the GPU): the kernel is one node of the graph, forward
    and backward, and the compiled step gives the eager gradients."""
    torch.manual_seed(0)
    attn = EuclidAttention(256, heads=4, causal=True).cuda()
    x = torch.randn(4, 512, 256, device="cuda", requires_grad=True)
    grad = torch.randn(4, 512, 256, device="cuda")
    results = []
    for module in (attn, torch.compile(attn, fullgraph=True)):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = module(x)[0]
        results.append((out.float(), *torch.autograd.grad(out, (x, *attn.parameters()), grad.to(out.dtype))))
    for compiled, eager in zip(*results):
        assert (compiled.float() - eager.float()).abs().max() <= 2e-2 * eager.float().abs().max()


def test_memory_grows_linearly_with_the_length():
    """Peak memory of a bf16 forward and backward beyond the inputs: O(L), as flash attention's (the output, the
    output gradient and the inputs' gradients; the scores at L = 8192 would take 1 GiB in bf16)."""
    peaks = {}
    for length in (2048, 8192):
        shape = (1, 8, length, 64)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in "qkv")
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = triton_euclid_attention(q, k, v, None, True)
        torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
        peaks[length] = torch.cuda.max_memory_allocated() - before
    assert peaks[8192] <= 6 * peaks[2048], peaks  # 4x the length: 4x the memory (O(L^2) would be 16x)
    assert peaks[8192] < 128 * 2**20, peaks  # the output, its gradient, dq, dk, dv: ~40 MiB; the scores: 1 GiB


def test_near_keys_in_float32_at_length_300():
    """Half the queries with keys within 1e-6 and 2e-6 of them, across several tiles of the default size, float32."""
    torch.manual_seed(1)
    q, v = torch.randn(1, 2, 300, 16) * 2, torch.randn(1, 2, 300, 16)
    u = torch.nn.functional.normalize(torch.randn(1, 2, 300, 16), dim=-1)
    k = torch.cat([q[:, :, :150] + 1e-6 * u[:, :, :150], q[:, :, :150] + 2e-6 * u[:, :, 150:]], dim=2)
    on = [t.cuda().requires_grad_() for t in (q, k, v)]
    out = triton_euclid_attention(*on)
    exact = [t.double().requires_grad_() for t in (q, k, v)]
    want = reference(*exact)
    grad = torch.randn(want.shape, dtype=torch.float64)
    got = torch.autograd.grad(out, on, grad.float().cuda())
    wanted = torch.autograd.grad(want, exact, grad)
    assert relative(out, want) <= 1e-5
    assert max(relative(g, w) for g, w in zip(got, wanted)) <= 1e-4


@pytest.mark.skipif(
    torch.cuda.is_available() and torch.cuda.get_device_properties(0).total_memory < 70 * 2**30,
    reason="needs 70 GiB of GPU memory",
)
def test_offsets_past_int32_and_more_heads_than_a_grid_axis_of_65535():
    """B * H * L * D = 2^31 (131072 heads of 1024 tokens, head dim 16): int32 offsets wrapped there (dK's rows
    read as zeros) and B * H on the grid's second axis passed its 65535. The last head against float64."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 131072, 1024, 16, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in "qkv")
    out = triton_euclid_attention(q, k, v)
    grad = torch.randn(1024, 16, device="cuda", dtype=torch.bfloat16)
    grads = torch.autograd.grad(out[0, -1], (q, k, v), grad)
    exact = [t[0, -1].detach().double().cpu().requires_grad_() for t in (q, k, v)]
    want = reference(*exact)
    wanted = torch.autograd.grad(want, exact, grad.double().cpu())
    assert relative(out[0, -1], want) <= 3e-2
    assert max(relative(g[0, -1], w) for g, w in zip(grads, wanted)) <= 3e-2
