"""Checks of euclid's Triton kernel, shared by two tiers: the process tier runs them on the CPU under Triton's
interpreter (tests/process/test_euclid_kernel_interpreter.py starts a process with ``TRITON_INTERPRET=1``: Triton
reads it when it is first imported, and every test process has imported it by then), the GPU tier on CUDA
(tests/gpu/). Values and gradients against float64 with every kind of mask SDPA takes, keys near their query (three
in one tile), bf16 inputs (small ones too, against the CPU path's error), rows that see nothing, a NaN, empty inputs,
meta tensors, float64, the operator's registration and one compiled graph in the mixer's layout. The shipped tiles
(64 keys, 64 queries forward, 32 backward): inputs of 70 and more span several.

    TRITON_INTERPRET=1 PYTHONPATH=. python -m pytest tests/euclid_kernel_cases.py
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton")

from attnexp.mixers import EuclidAttention
from attnexp.mixers.euclid.ops.kernel import operator as kernel
from attnexp.mixers.euclid.ops.kernel.operator import euclid_attention_op, triton_euclid_attention

EPS = 1e-9


@pytest.fixture
def device() -> str:
    """Where the kernel runs: the CPU, under the interpreter (the GPU tier gives "cuda")."""
    if not kernel.interpreting():
        pytest.skip("on the CPU the kernel runs under TRITON_INTERPRET=1, set before Triton is imported")
    return "cpu"


def reference(q, k, v, mask=None, causal=False, eps=EPS):
    """The formula in float64, distances from the differences, as SDPA takes masks; a row that sees nothing: 0."""
    squared = (q.double().unsqueeze(-2) - k.double().unsqueeze(-3)).square().sum(-1)
    scores = 1.0 / (torch.where(squared > 0, squared.clamp_min(1e-300).sqrt(), 0.0) * q.shape[-1] ** -0.5 + eps)
    if mask is not None and mask.dtype != torch.bool:
        scores = scores + mask.double()
    blocked = scores.isneginf()
    if mask is not None and mask.dtype == torch.bool:
        blocked = blocked | ~mask
    if causal:
        blocked = blocked | ~torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    weights = scores.masked_fill(blocked, float("-inf")).softmax(-1).nan_to_num(0.0)
    return weights @ v.double()


def assert_matches(device, q, k, v, mask=None, causal=False, tolerance=2e-6):
    """Output and the gradients of q, k and v on ``device``, for one random output gradient, within ``tolerance`` of
    the largest magnitude of each (the reference on the CPU in float64)."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    on = [t.detach().to(device).requires_grad_() for t in (q, k, v)]
    out = triton_euclid_attention(*on, None if mask is None else mask.to(device), causal, None, EPS)
    want = reference(q, k, v, mask, causal)
    grad = torch.randn(want.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    got = [t.cpu() for t in (out, *torch.autograd.grad(out, on, grad.to(device, out.dtype)))]
    wanted = (want, *torch.autograd.grad(want, (q, k, v), grad))
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, wanted):
        error = ((a.double() - b).abs().max() / b.abs().max().clamp_min(1e-12)).item()
        assert error <= tolerance, (name, error)


def inputs(b=2, h=1, lq=20, lk=20, d=8, seed=0):
    torch.manual_seed(seed)
    return torch.randn(b, h, lq, d), torch.randn(b, h, lk, d), torch.randn(b, h, lk, d)


def padding(b=2, lk=20):
    """Key padding: the second example's last keys blocked.  # (B, 1, 1, Lk)"""
    keep = torch.ones(b, 1, 1, lk, dtype=torch.bool)
    keep[-1, ..., 13:] = False
    return keep


def boolean_mask():
    """Keys blocked at random per query, one query blocked from every key.  # (2, 1, 20, 20)"""
    keep = torch.rand(2, 1, 20, 20, generator=torch.Generator().manual_seed(1)) > 0.4
    keep[0, 0, 5] = False
    return keep


MASKS = {  # (mask, causal, batch): masks as SDPA takes them
    "boolean": lambda: (boolean_mask(), False, 2),
    "additive": lambda: (
        torch.randn(1, 1, 20, 20).masked_fill(torch.eye(20, dtype=torch.bool), float("-inf")),
        False,
        1,
    ),
    "causal and padding": lambda: (padding(), True, 2),
}


@pytest.mark.parametrize("kind", MASKS)
def test_the_kernel_gives_the_formula_with_every_mask(kind, device):
    mask, causal, batch = MASKS[kind]()
    assert_matches(device, *inputs(b=batch), mask, causal)


def test_cross_attention_with_fewer_queries_than_keys_and_a_padded_head_dim(device):
    q, k, v = inputs(lq=9, lk=37, d=20)
    assert_matches(device, q, k, v, padding(lk=37))


def near_pairs(delta, offset=0.0):
    """Two keys within delta and 2 delta of every query, all moved by ``offset`` along each axis."""
    torch.manual_seed(1)
    q, v = torch.randn(1, 2, 16, 16) * 2, torch.randn(1, 2, 16, 16)
    u = torch.nn.functional.normalize(torch.randn(1, 2, 16, 16), dim=-1)
    k = torch.cat([q[:, :, :8] + delta * u[:, :, :8], q[:, :, :8] + 2 * delta * u[:, :, 8:]], dim=2)
    return q + offset, k + offset, v


def test_keys_near_their_query_get_exact_distances(device):
    """The expansion alone cannot tell keys at delta and 2 delta apart (it gave outputs off by up to 10 at delta
    1e-6): a tile holding such a pair is computed from q - k, forward and backward."""
    assert_matches(device, *near_pairs(1e-6))


def test_three_near_keys_of_a_query_in_one_tile_are_exact(device, delta=1e-6):
    """Three keys within delta, 1.5 and 2 delta of one query, in one 64-key tile of 80 keys, and another query
    with four such keys (scripts/euclid_accuracy.py's competing case): with each tile's two nearest keys exact the
    output was 0.58 off and the gradients 100%; every pair of the tile from the differences is exact."""
    torch.manual_seed(5)
    q, k, v = (torch.randn(1, 1, 80, 16) for _ in range(3))
    u = torch.nn.functional.normalize(torch.randn(1, 1, 7, 16), dim=-1)
    for j, factor in enumerate((1.0, 1.5, 2.0)):
        k[:, :, 10 + j] = q[:, :, 7] + factor * delta * u[:, :, j]
    for j, factor in enumerate((1.0, 1.25, 1.5, 2.0)):
        k[:, :, 30 + j] = q[:, :, 70] + factor * delta * u[:, :, 3 + j]
    assert_matches(device, q, k, v)


def test_keys_equal_to_their_query_share_the_weight(device):
    """Two keys at distance exactly 0 score 1/eps (1.4e9 in base 2, where float32's spacing is 128): the backward
    pass keeps each row's largest logit and sum apart (their log-sum-exp gave each key weight 1)."""
    torch.manual_seed(10)
    q, k, v = (torch.randint(-2, 3, (1, 2, 16, 16)).float() for _ in range(3))
    k[:, :, 2], k[:, :, 6] = q[:, :, 4], q[:, :, 4]
    assert_matches(device, q, k, v)


def test_bf16_inputs_stay_bf16_and_match_the_formula_to_their_precision(device):
    """q.k in bf16 (float32 sums), norms and the nearest keys' differences in float32: within bf16's rounding of the
    weights and values of the float64 formula on the same (rounded) inputs."""
    q, k, v = (t.bfloat16() for t in near_pairs(1e-2))
    assert triton_euclid_attention(q.to(device), k.to(device), v.to(device)).dtype == torch.bfloat16
    assert_matches(device, q, k, v, tolerance=3e-2)


def test_rows_that_see_no_key_give_zeros_and_a_nan_stays_in_its_row(device):
    q, k, v = (t.to(device).requires_grad_() for t in inputs(lq=16, lk=16))
    keep = padding(lk=16).to(device)
    keep[0, ..., :] = False  # the first example may see nothing
    q.data[1, 0, 3, 0] = float("nan")
    out = triton_euclid_attention(q, k, v, keep)
    out.sum().backward()
    assert not out[0].any() and not q.grad[0].any() and not k.grad[0].any() and not v.grad[0].any()
    assert out[1, 0, 3].isnan().all() and torch.isfinite(out[1, 0, torch.arange(16) != 3]).all()


def test_empty_inputs_give_what_sdpa_gives(device):
    for lq, lk in ((0, 5), (4, 0)):
        q, k, v = (torch.randn(1, 2, n, 8, device=device, requires_grad=True) for n in (lq, lk, lk))
        out = triton_euclid_attention(q, k, v)
        torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v))
        assert all(g is not None and not g.any() for g in torch.autograd.grad(out.sum(), (q, k, v)))


def test_small_bf16_inputs_have_the_cpu_paths_gradient_error(device):
    """|x| ~ 1e-4 in bf16: every score is large (z^3 ~ 1e12 in the gradient), so rowsum(p * dp) must come from the
    weights, not dO . O with O rounded to bf16 (gradients 0.11-0.13 off, against 0.004 on the CPU path); within
    twice the CPU path's error (bf16 autocast, the rows rule) on the same rounded inputs."""
    from attnexp.mixers.euclid.ops.fused import fused_euclid_attention
    from attnexp.mixers.euclid.ops.rows import RowsEuclid

    torch.manual_seed(6)
    q, k, v = (torch.randn(1, 1, 70, 16).mul(1e-4).bfloat16() for _ in range(3))

    def cpu(q, k, v):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return fused_euclid_attention(q, k, v, None, q.shape[-1] ** -0.5, EPS, RowsEuclid)

    def kernel_path(q, k, v):
        return triton_euclid_attention(q.to(device), k.to(device), v.to(device), None, False, None, EPS)

    errors = {name: gradient_error(path, q, k, v) for name, path in (("cpu", cpu), ("kernel", kernel_path))}
    assert errors["kernel"] <= 2 * errors["cpu"], errors


def gradient_error(path, q, k, v):
    """The largest error of q's, k's and v's gradients against float64, each over its largest magnitude."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    exact = [t.detach().double().requires_grad_() for t in (q, k, v)]
    want = reference(*exact)
    grad = torch.randn(want.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    out = path(q, k, v)
    got = torch.autograd.grad(out, (q, k, v), grad.to(out.device, out.dtype))
    wanted = torch.autograd.grad(want, exact, grad)
    return max(((a.cpu().double() - b).abs().max() / b.abs().max()).item() for a, b in zip(got, wanted))


def heads_of(x, heads):
    """(B, H, L, D) views of a (B, L, H * D) projection, as the mixer makes q, k and v: not contiguous."""
    b, n, _ = x.shape
    return x.view(b, n, heads, -1).transpose(1, 2)


@pytest.mark.parametrize("layout", ["contiguous", "mixer"])
def test_the_operator_is_registered_whole_and_compiles_in_one_graph(layout, device):
    """torch.library.opcheck (schema, fake tensors, autograd registration, the compiled dispatch), and
    torch.compile(fullgraph=True) keeps the operator in its graph with the eager numbers, forward and backward, with
    the mixer's layout too: q, k and v as views of (B, L, H * D) projections. The backward's fake tensors once took
    q's strides where the kernels write contiguous gradients, and the compiled graph's views of them failed."""
    torch.manual_seed(0)
    x = [torch.randn(2, 12, 16, device=device, requires_grad=True) for _ in "qkv"]  # (B, L, H * D)

    def split(x):
        return [heads_of(t, 2) if layout == "mixer" else heads_of(t, 2).contiguous() for t in x]

    checks = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    torch.library.opcheck(euclid_attention_op, (*split(x), None, True, 0.5, EPS), test_utils=checks)

    def attend(*x):
        return triton_euclid_attention(*split(x), None, True).square().sum()

    eager = torch.autograd.grad(attend(*x), x)
    compiled = torch.autograd.grad(torch.compile(attend, backend="aot_eager", fullgraph=True)(*x), x)
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a, b)


def test_meta_tensors_give_the_shapes_and_float64_is_refused(device):
    """Meta tensors (shape inference) go through the operator's fake implementation; float64 inputs are refused
    with a word, where they were computed in float32 without one."""
    from attnexp.errors import AttnexpError

    q = torch.empty(2, 3, 70, 8, device="meta", requires_grad=True)
    out = triton_euclid_attention(q, q, q, None, True)
    assert out.shape == (2, 3, 70, 8) and out.device.type == "meta"
    assert torch.autograd.grad(out.sum(), q)[0].shape == q.shape
    with pytest.raises(AttnexpError, match="float64"):
        triton_euclid_attention(*(t.double().to(device) for t in inputs()))


def test_the_mixer_runs_the_kernel_where_it_is_available(device, monkeypatch):
    """On a GPU ``model.path=auto`` runs the kernel, with the causal mask as its flag (the interpreter stands in for
    the GPU on a CPU), and gives the explicit formula's numbers with a padding mask, forward and backward."""
    torch.manual_seed(3)
    attn = EuclidAttention(8, heads=1, causal=True).to(device)
    x = torch.randn(1, 20, 8, device=device, requires_grad=True)
    keep = padding(b=1).to(device)
    monkeypatch.setattr("attnexp.mixers.euclid.mixer.available", lambda device: True)
    launched = []
    monkeypatch.setattr(kernel, "run", lambda launches: launched.extend(launches) or LAUNCH(launches))
    fast = attn(x, mask=keep)[0]
    assert launched, "the mixer did not launch the kernel"
    explicit, _ = attn(x, mask=keep, need_weights=True)
    grad = torch.randn_like(fast)
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-4)
    for a, b in zip(torch.autograd.grad(fast, (x, *attn.parameters()), grad),
                    torch.autograd.grad(explicit, (x, *attn.parameters()), grad)):  # fmt: skip
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-3)


LAUNCH = kernel.run
