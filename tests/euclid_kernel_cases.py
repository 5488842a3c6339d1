"""Checks of euclid's Triton kernel, shared by two tiers: the unit tier runs them on the CPU under Triton's
interpreter (tests/unit/test_euclid_kernel.py starts a process with ``TRITON_INTERPRET=1``: Triton reads it when it
is first imported, and every test process has imported it by then), the GPU tier on CUDA (tests/gpu/). Values and
gradients against float64 with every kind of mask SDPA takes, keys near their query, bf16 inputs, rows that see
nothing, a NaN, empty inputs, the operator's registration and one compiled graph. Tiles of 16 queries and keys, so
that small inputs span several.

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


def test_the_two_nearest_keys_get_exact_distances(device):
    """The expansion alone cannot tell keys at delta and 2 delta apart (it gave outputs off by up to 10 at delta
    1e-6): the kernel takes each row's two nearest keys of a tile from q - k, forward and backward."""
    assert_matches(device, *near_pairs(1e-6))


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


def test_the_operator_is_registered_whole_and_compiles_in_one_graph(device):
    """torch.library.opcheck (schema, fake tensors, autograd registration), and torch.compile(fullgraph=True) keeps
    the operator in its graph with the eager numbers, forward and backward."""
    q, k, v = (t[:1, :, :6].to(device).requires_grad_() for t in inputs())
    checks = ("test_schema", "test_autograd_registration", "test_faketensor")  # the compiled graph: below
    torch.library.opcheck(euclid_attention_op, (q, k, v, None, True, 0.5, EPS), test_utils=checks)

    def attend(q, k, v):
        return triton_euclid_attention(q, k, v, None, True).square().sum()

    eager = torch.autograd.grad(attend(q, k, v), (q, k, v))
    compiled = torch.autograd.grad(torch.compile(attend, backend="aot_eager", fullgraph=True)(q, k, v), (q, k, v))
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a, b)


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
