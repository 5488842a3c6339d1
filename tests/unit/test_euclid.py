"""Euclid attention on every path: the formula's values and gradients against float64, exact distances for
keys near their query, masks, tiles, empty inputs, refused inputs and options (compile and export:
tests/compilers/test_euclid_compile.py)."""

from __future__ import annotations

import pytest
import torch

from attnexp.errors import AttnexpError
from attnexp.mixers import EuclidAttention, causal_mask
from attnexp.mixers.euclid.formula import euclid_score
from attnexp.mixers.euclid.ops import tiles
from attnexp.mixers.euclid.ops.fixed import FixedEuclid
from attnexp.mixers.euclid.ops.fused import fused_euclid_attention
from attnexp.mixers.euclid.ops.rows import RowsEuclid
from attnexp.mixers.multihead import attention

EPS = 1e-3


def reference(q, k, v, mask=None, eps=EPS):
    """The formula in float64 with distances from the differences (no expansion); the square root's gradient is 0
    at 0."""
    squared = (q.double().unsqueeze(-2) - k.double().unsqueeze(-3)).square().sum(-1)
    distance = torch.where(squared > 0, squared.clamp_min(1e-300).sqrt(), torch.zeros_like(squared))
    scores = 1.0 / (distance * q.shape[-1] ** -0.5 + eps)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v.double()


def explicit(q, k, v, mask, scale, eps):
    return attention(euclid_score(q, k, scale, eps), v, mask)[0]


def rows(q, k, v, mask, scale, eps):
    return fused_euclid_attention(q, k, v, mask, scale, eps, RowsEuclid)


def fixed(q, k, v, mask, scale, eps):
    return fused_euclid_attention(q, k, v, mask, scale, eps, FixedEuclid)


PATHS = {"explicit": explicit, "rows": rows, "fixed": fixed}


def qkv(seed=0, b=2, h=2, lq=9, lk=9, d=8):
    torch.manual_seed(seed)
    q, k, v = torch.randn(b, h, lq, d), torch.randn(b, h, lk, d), torch.randn(b, h, lk, d)
    k[:, :, 3] = q[:, :, min(3, lq - 1)]  # a key equal to its query: distance 0, score 1/eps
    return [t.requires_grad_() for t in (q, k, v)]


def some_mask(b=2, lq=9, lk=9):
    """Random keys dropped, causal, and one query row that may attend to nothing.  # (B, 1, Lq, Lk)"""
    torch.manual_seed(5)
    mask = (torch.rand(b, 1, lq, lk) > 0.3) & causal_mask(lq, lk)
    mask[..., 0] = True
    mask[1, 0, 4] = False
    return mask


def assert_matches(out, ref, inputs, atol=1e-5, grads=True):
    """Values, and gradients for one random output gradient, against the float64 reference."""
    torch.testing.assert_close(out.double(), ref, atol=atol, rtol=1e-4)
    if not grads:
        return
    grad = torch.randn_like(ref)
    for got, want in zip(torch.autograd.grad(out, inputs, grad.to(out.dtype)), torch.autograd.grad(ref, inputs, grad)):
        torch.testing.assert_close(
            got.double(), want.double(), atol=atol * max(1.0, want.abs().max().item()), rtol=1e-3
        )


@pytest.fixture(params=["one tile", "row tiles", "uneven tiles"])
def tiling(request, monkeypatch):
    """The fused path as one tile (weights kept for the backward pass), one query row per tile, or uneven tiles."""
    if request.param != "one tile":
        monkeypatch.setattr(tiles, "KEEP_SCORES", 0)
        monkeypatch.setattr(tiles, "CPU_TILE_SCORES", 9 if request.param == "row tiles" else 20)
    return request.param


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
@pytest.mark.parametrize("path", PATHS)
def test_every_path_gives_the_formula(path, masked, tiling):
    q, k, v = qkv()
    mask = some_mask() if masked else None
    assert_matches(PATHS[path](q, k, v, mask, 8**-0.5, EPS), reference(q, k, v, mask), (q, k, v))


@pytest.mark.parametrize("path", PATHS)
def test_cross_attention_one_query_and_many_keys(path, tiling):
    """Fewer queries than keys, one query against 40 keys, and eps = 1e-9 (score 1e9 at distance 0)."""
    for lq, lk in ((5, 37), (1, 40), (11, 7)):
        q, k, v = qkv(6, lq=lq, lk=lk, d=20)
        assert_matches(PATHS[path](q, k, v, None, 20**-0.5, 1e-9), reference(q, k, v, eps=1e-9), (q, k, v))


def near_duplicates(delta: float) -> list[torch.Tensor]:
    """Keys within delta and 2 delta of each query."""
    torch.manual_seed(1)
    b, h, d = 2, 2, 16
    q, v = torch.randn(b, h, 16, d) * 2, torch.randn(b, h, 16, d) * 2
    u = torch.nn.functional.normalize(torch.randn(b, h, 16, d), dim=-1)
    k = torch.cat([q[:, :, :8] + delta * u[:, :, :8], q[:, :, :8] + 2 * delta * u[:, :, 8:]], dim=2)
    return [t.requires_grad_() for t in (q, k, v)]


@pytest.mark.parametrize("delta", [1e-2, 1e-3, 1e-4, 1e-5, 1e-6])
@pytest.mark.parametrize("path", PATHS)
def test_keys_near_their_query_get_exact_distances(path, delta, tiling):
    """The expansion ||q||^2 + ||k||^2 - 2 q.k alone cannot tell keys at delta and 2 delta apart below delta ~ 1e-3
    (its rounding is larger than the distance) and gave outputs off by up to 10: values and gradients."""
    q, k, v = near_duplicates(delta)
    assert_matches(PATHS[path](q, k, v, None, 16**-0.5, 1e-9), reference(q, k, v, eps=1e-9), (q, k, v))


def test_the_fixed_shape_path_takes_the_nearest_keys_gradient_from_their_differences(tiling):
    """Two keys at distance 1e-5 either side of a query share its weight (1/distance ~ 3e5): the fixed-shape path
    (compiled graphs on a CPU, GPUs without Triton) took the gradient of those keys through the expansion, 3-6%
    off (0.75 on other inputs); from their differences, as the query's, it is at rounding level."""
    torch.manual_seed(5)
    q, k, v = (torch.randn(1, 2, 6, 8) * 2 for _ in range(3))
    u = torch.nn.functional.normalize(torch.randn(1, 2, 8), dim=-1)
    k[:, :, 1], k[:, :, 4] = q[:, :, 3] + 1e-5 * u, q[:, :, 3] - 1e-5 * u
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    want = reference(q, k, v, eps=1e-9)
    grad = torch.randn_like(want)
    got = torch.autograd.grad(fixed(q, k, v, None, 8**-0.5, 1e-9), (q, k, v), grad.float())
    for name, a, b in zip("qkv", got, torch.autograd.grad(want, (q, k, v), grad)):
        assert (a.double() - b).abs().max() <= 1e-5 * b.abs().max(), name


@pytest.mark.parametrize("path", PATHS)
def test_keys_at_distance_exactly_zero_share_the_weight(path, tiling):
    """Two keys equal to a query (integer vectors: the squared distance is exactly 0, score 1/eps) share its weight,
    and the square root's gradient there is 0."""
    torch.manual_seed(10)
    q, k, v = (torch.randint(-2, 3, (1, 2, 9, 8)).float() for _ in range(3))
    k[:, :, 2], k[:, :, 6] = q[:, :, 4], q[:, :, 4]
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    weights = attention(euclid_score(q, k, 8**-0.5, 1e-9), v, None)[1]
    torch.testing.assert_close(weights[:, :, 4, [2, 6]], torch.full((1, 2, 2), 0.5))
    assert_matches(PATHS[path](q, k, v, None, 8**-0.5, 1e-9), reference(q, k, v, eps=1e-9), (q, k, v))


@pytest.mark.parametrize("path", PATHS)
def test_empty_sequences_give_what_sdpa_gives(path):
    """No query: an empty output; no key: zeros (SDPA's answers), never a reshape error; the output stays in the graph
    and the inputs get zero gradients, as SDPA's do (the fused path's was detached)."""
    fn = PATHS[path]
    for lq, lk in ((0, 5), (4, 0), (0, 0)):
        q, k, v = (torch.randn(2, 2, n, 8, requires_grad=True) for n in (lq, lk, lk))
        out = fn(q, k, v, None, 8**-0.5, EPS)
        torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v))
        grads = torch.autograd.grad(out.sum(), (q, k, v), allow_unused=True)
        assert all(g is not None and not g.any() and g.shape == t.shape for g, t in zip(grads, (q, k, v)))


def test_empty_sequence_through_the_module():
    attn = EuclidAttention(8, heads=2)
    out, _ = attn(torch.randn(3, 0, 8))
    assert out.shape == (3, 0, 8)
    out, _ = attn(torch.randn(3, 4, 8), context=torch.randn(3, 0, 8))
    assert out.shape == (3, 4, 8) and torch.equal(out, attn.out_proj(torch.zeros(3, 4, 8)))


def test_a_nan_query_spreads_to_its_output_row():
    """A NaN is never hidden: the divergence check must see it."""
    q, k, v = (t.detach() for t in qkv(3))
    q[0, 1, 2, 0] = float("nan")
    for fn in PATHS.values():
        out = fn(q, k, v, None, 8**-0.5, EPS)
        assert torch.isnan(out[0, 1, 2]).all() and torch.isfinite(out[1]).all()


def test_tiles_keep_no_score_matrix_for_backward(monkeypatch):
    """Long sequences: autograd saves q, k and v (each with at most two columns more: the rows path's norms), the
    output, row statistics, the nearest keys and a view of the caller's (B, 1, 1, Lk) padding mask, nothing of size
    Lq x Lk."""
    monkeypatch.setattr(tiles, "KEEP_SCORES", 1 << 16)  # fewer than the 2 x 2 x 300 x 300 scores here
    q, k, v = (torch.randn(2, 2, 300, 4, requires_grad=True) for _ in range(3))
    padding = torch.ones(2, 1, 1, 300, dtype=torch.bool)
    padding[1, ..., 200:] = False
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        fused_euclid_attention(q, k, v, padding, 0.5, EPS).sum().backward()
    assert saved and max(t.untyped_storage().nbytes() for t in saved) <= 4 * q.numel() * (4 + 2) / 4
    assert all(torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0 for t in (q, k, v))


@pytest.mark.parametrize("causal", [False, True], ids=["euclid", "causal"])
@pytest.mark.parametrize("length", [16, 256], ids=["one-tile", "tiled"])
def test_fused_path_matches_explicit_path_in_the_module(causal, length):
    """With a padding mask: values and gradients of the input and every weight; without grad (evaluation) too."""
    torch.manual_seed(12)
    attn = EuclidAttention(16, heads=2, causal=causal)
    x = torch.randn(3, length, 16, requires_grad=True)
    padding = torch.ones(3, 1, 1, length, dtype=torch.bool)
    padding[-1, ..., 10:] = False
    fast, none = attn(x, mask=padding)
    explicit_out, weights = attn(x, mask=padding, need_weights=True)
    assert none is None and weights is not None
    grad = torch.randn_like(fast)
    torch.testing.assert_close(fast, explicit_out, atol=1e-5, rtol=1e-4)
    for a, b in zip(
        torch.autograd.grad(fast, (x, *attn.parameters()), grad),
        torch.autograd.grad(explicit_out, (x, *attn.parameters()), grad),
    ):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-3)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, mask=padding)[0], explicit_out.detach(), atol=1e-5, rtol=1e-4)


def test_bfloat16_autocast_computes_in_float32():
    """The fused path computes in float32, returns the input dtype, and its backward stays float32 even when called
    inside the autocast block."""
    torch.manual_seed(7)
    attn = EuclidAttention(16, heads=2)
    x = torch.randn(1, 64, 16, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fast, _ = attn(x)
        explicit_out, _weights = attn(x, need_weights=True)
        inside = torch.autograd.grad(fast.float().sum(), x, retain_graph=True)[0]
    assert fast.dtype == explicit_out.dtype == torch.bfloat16 and torch.isfinite(fast).all()
    torch.testing.assert_close(fast.float(), explicit_out.float(), atol=2e-2, rtol=2e-2)
    outside = torch.autograd.grad(fast.float().sum(), x)[0]
    torch.testing.assert_close(inside, outside, atol=0, rtol=0)


def test_float64_inputs_keep_their_dtype():
    q, k, v = (t.detach().double() for t in qkv(11))
    assert fused_euclid_attention(q, k, v, None, 8**-0.5, EPS).dtype == torch.float64


def test_path_choice():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    attn = EuclidAttention(64, heads=4)  # head dim 16
    assert attn.path_for(cpu) == "fused" and attn.path_for(cuda) == "fused"  # one computation on every device
    assert attn.path_for(cpu, need_weights=True) == "explicit"
    assert EuclidAttention(64, heads=4, path="explicit").path_for(cpu) == "explicit"
    dropping = EuclidAttention(64, heads=4, dropout=0.1)
    assert dropping.path_for(cpu) == "explicit" and dropping.eval().path_for(cpu) == "fused"


def test_path_options_are_checked():
    for path in ("tiled", "flex"):
        with pytest.raises(
            AttnexpError, match=rf"model\.path='{path}' is not a path of this mixer.*auto, explicit, fused \("
        ):
            EuclidAttention(8, path=path)
    with pytest.raises(AttnexpError, match="no attention dropout"):
        EuclidAttention(8, path="fused", dropout=0.1)


@pytest.mark.parametrize("eps", [1e-45, 1e-39, 1e-20, 0.0, -1.0, float("inf"), float("nan"), "tiny"])
def test_eps_whose_score_or_its_square_overflows_float32_is_refused(eps):
    """1/eps is the score of a key equal to its query and the gradient holds its square: both must be finite float32
    numbers (1e-45 gave NaN rows; eps = 5e-20 NaN gradients at q = k)."""
    with pytest.raises(AttnexpError, match=r"model\.eps"):
        EuclidAttention(8, eps=eps)


@pytest.mark.parametrize("path", ["explicit", "fused"])
def test_the_smallest_eps_allowed_keeps_gradients_finite_where_q_equals_k(path):
    eps = 1.1e-19
    attn = EuclidAttention(8, heads=2, eps=eps, path=path)
    with torch.no_grad():
        attn.k_proj.load_state_dict(
            attn.q_proj.state_dict()
        )  # q = k for every token: each query's own key at distance 0
    x = torch.randn(2, 5, 8, requires_grad=True)
    out, _ = attn(x)
    out.square().sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in attn.parameters())


def test_a_context_of_another_batch_is_refused_on_every_path():
    """A (1, 16, 64) context for (8, 16, 64) queries: refused (the compiled kernel read past the end of k and v)."""
    x, context = torch.randn(8, 16, 64), torch.randn(1, 16, 64)
    for path in ("explicit", "fused"):
        with pytest.raises(ValueError, match="context's batch"):
            EuclidAttention(64, heads=4, path=path)(x, context=context)


def test_masks_that_are_not_boolean_or_do_not_broadcast_are_refused():
    attn = EuclidAttention(8, heads=2)
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match="boolean"):
        attn(x, mask=torch.ones(2, 1, 5, 5, dtype=torch.int64))
    with pytest.raises(ValueError, match="broadcast"):
        attn(x, mask=torch.ones(3, 1, 5, 5, dtype=torch.bool))


def test_deterministic_algorithms_asked_for_run_the_torch_path_not_the_kernel(monkeypatch):
    """The kernel sums dq with atomic adds (last bits vary between runs on a GPU): trainer.deterministic=true runs
    the torch path instead."""
    import torch

    from attnexp.mixers import EuclidAttention
    from attnexp.mixers.euclid import mixer

    launched = []
    monkeypatch.setattr(mixer, "available", lambda device: True)
    monkeypatch.setattr(mixer, "triton_euclid_attention", lambda *args: launched.append(args) or args[0])
    attn = EuclidAttention(8, heads=2, path="fused")
    x = torch.randn(2, 5, 8)
    was = torch.are_deterministic_algorithms_enabled()  # a Trainer with deterministic=true earlier in this process
    try:
        torch.use_deterministic_algorithms(False)
        attn(x)
        assert launched  # the kernel where it is available
        launched.clear()
        torch.use_deterministic_algorithms(True)
        attn(x)
    finally:
        torch.use_deterministic_algorithms(was)
    assert not launched
