"""Every fast attention path gives the explicit formula's values and gradients."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from attnexp.attention import DotAttention, EuclidAttention, causal_mask, euclid, euclid_tiled
from attnexp.attention.euclid_small import small_euclid_attention
from attnexp.attention.euclid_tiled import tiled_euclid_attention
from attnexp.attention.distance import euclid_score
from attnexp.attention.euclid import euclid_path, flex_euclid_attention
from attnexp.attention.multihead import softmax_attention

EPS = 1e-3


def cdist_reference(q, k, v, mask=None, eps=EPS):
    """The euclid formula written with torch.cdist (no matmul expansion)."""
    dist = torch.cdist(q, k, compute_mode="donot_use_mm_for_euclid_dist")
    scores = 1.0 / (dist * q.shape[-1] ** -0.5 + eps)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(-1)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)
    return weights @ v


def qkv(seed=0, b=2, h=2, length=9, d=8):
    torch.manual_seed(seed)
    q, k, v = (torch.randn(b, h, length, d) for _ in range(3))
    k[:, :, 3] = q[:, :, 3]  # a key equal to its query: distance 0, score 1/eps
    return [t.requires_grad_() for t in (q, k, v)]


def some_mask():
    """Random keys dropped, causal, and one query row that may attend to nothing.  # (B, 1, Lq, Lk)"""
    torch.manual_seed(5)
    mask = (torch.rand(2, 1, 9, 9) > 0.3) & causal_mask(9)
    mask[..., 0] = True
    mask[1, 0, 4] = False
    return mask


def assert_same(fast, ref, inputs, atol=1e-4):
    torch.testing.assert_close(fast, ref, atol=atol, rtol=1e-4)
    grad = torch.randn_like(ref)
    for g_fast, g_ref in zip(torch.autograd.grad(fast, inputs, grad), torch.autograd.grad(ref, inputs, grad)):
        torch.testing.assert_close(g_fast, g_ref, atol=atol, rtol=1e-3)


@pytest.mark.parametrize("tile", [4, 20, 243, 1 << 17], ids=["row-tiles", "uneven-tiles", "partial-group", "whole-heads"])
@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
def test_tiled_euclid_matches_cdist_formula(masked, tile, monkeypatch):
    """Tiles of one query row, tiles that split the rows unevenly, 3 heads per tile over 4, all heads at once."""
    monkeypatch.setattr(euclid_tiled, "CPU_TILE_SCORES", tile)
    q, k, v = qkv()
    mask = some_mask() if masked else None
    fast = tiled_euclid_attention(q, k, v, mask, 8**-0.5, EPS)
    assert_same(fast, cdist_reference(q, k, v, mask), (q, k, v))


def test_tiled_euclid_cross_attention_and_tiny_eps(monkeypatch):
    """Fewer keys than queries, and eps = 1e-9 (score 1e9 at distance 0) with float64 inputs."""
    monkeypatch.setattr(euclid_tiled, "CPU_TILE_SCORES", 10)
    _, k, v = qkv(6, length=7)
    q = torch.randn(2, 2, 11, 8)
    q[:, :, 2] = k[:, :, 5].detach()
    q.requires_grad_()
    fast = tiled_euclid_attention(q.double(), k.double(), v.double(), None, 8**-0.5, 1e-9)
    assert fast.dtype == torch.float64
    assert_same(fast.float(), cdist_reference(q, k, v, eps=1e-9), (q, k, v))


def test_tiled_euclid_keeps_no_score_matrix_for_backward():
    """Autograd saves q, k, v and a view of the caller's (B, 1, 1, Lk) padding mask: nothing of size Lq x Lk."""
    q, k, v = (torch.randn(2, 2, 300, 4, requires_grad=True) for _ in range(3))
    padding = torch.ones(2, 1, 1, 300, dtype=torch.bool)
    padding[1, ..., 200:] = False
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        tiled_euclid_attention(q, k, v, padding, 0.5, EPS).sum().backward()
    assert saved and max(t.untyped_storage().nbytes() for t in saved) <= 4 * q.numel()
    assert all(torch.isfinite(t.grad).all() and t.grad.abs().sum() > 0 for t in (q, k, v))


@pytest.mark.parametrize("batch", [1, 3])
def test_tiled_path_matches_explicit_path_in_the_module(batch):
    """Causal euclid attention with a padding mask, 256 x 256 scores: the module's tiled path
    against its explicit path, values and gradients of the input and every weight."""
    torch.manual_seed(9)
    attn = EuclidAttention(16, heads=2, causal=True)
    x = torch.randn(batch, 256, 16, requires_grad=True)
    padding = torch.ones(batch, 1, 1, 256, dtype=torch.bool)
    padding[-1, ..., 100:] = False
    fast, none = attn(x, mask=padding)
    explicit, weights = attn(x, mask=padding, need_weights=True)
    assert none is None and weights is not None
    assert_same(fast, explicit, (x, *attn.parameters()), atol=1e-5)


def test_tiled_euclid_with_keys_at_distance_exactly_zero():
    """Two keys equal to a query (integer vectors: the squared distance is exactly 0, score 1/eps):
    they share its weight, and the square root's gradient there is 0, as in the explicit formula."""
    torch.manual_seed(10)
    q, k, v = (torch.randint(-2, 3, (1, 2, 9, 8)).float() for _ in range(3))
    k[:, :, 2], k[:, :, 6] = q[:, :, 4], q[:, :, 4]
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    fast = tiled_euclid_attention(q, k, v, None, 8**-0.5, 1e-9)
    weights = softmax_attention(euclid_score(q, k, 8**-0.5, 1e-9), v, None)[1]
    torch.testing.assert_close(weights[:, :, 4, [2, 6]], torch.full((1, 2, 2), 0.5))
    assert_same(fast, weights @ v, (q, k, v), atol=1e-5)


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
def test_small_euclid_matches_cdist_formula(masked):
    q, k, v = qkv(4)
    mask = some_mask() if masked else None
    assert_same(small_euclid_attention(q, k, v, mask, 8**-0.5, EPS), cdist_reference(q, k, v, mask), (q, k, v))


def test_small_euclid_cross_attention_float64_and_distance_exactly_zero():
    """Fewer keys than queries; two keys equal to a query (squared distance exactly 0, score 1/eps) share its
    weight, and the square root's gradient there is 0, as in the explicit formula."""
    torch.manual_seed(11)
    q, k, v = (torch.randint(-2, 3, (1, 2, n, 8)).double() for n in (9, 7, 7))
    k[:, :, 2], k[:, :, 6] = q[:, :, 4], q[:, :, 4]
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    fast = small_euclid_attention(q, k, v, None, 8**-0.5, 1e-9)
    assert fast.dtype == torch.float64
    weights = softmax_attention(euclid_score(q, k, 8**-0.5, 1e-9), v, None)[1]
    torch.testing.assert_close(weights[:, :, 4, [2, 6]].float(), torch.full((1, 2, 2), 0.5))
    assert_same(fast, weights @ v, (q, k, v), atol=1e-5)


@pytest.mark.parametrize("causal", [False, True], ids=["euclid", "causal"])
def test_small_path_matches_explicit_path_in_the_module(causal):
    """The module's default path at patch-model sizes, with a padding mask, against its explicit path:
    values and gradients of the input and every weight; without grad (evaluation) too."""
    torch.manual_seed(12)
    attn = EuclidAttention(16, heads=2, causal=causal)
    x = torch.randn(3, 16, 16, requires_grad=True)
    padding = torch.ones(3, 1, 1, 16, dtype=torch.bool)
    padding[-1, ..., 10:] = False
    fast, none = attn(x, mask=padding)
    explicit, _ = attn(x, mask=padding, need_weights=True)
    assert none is None
    assert_same(fast, explicit, (x, *attn.parameters()), atol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, mask=padding)[0], explicit.detach(), atol=1e-5, rtol=1e-4)


def test_explicit_euclid_matches_cdist_formula():
    q, k, v = qkv(1)
    attn = EuclidAttention(16, heads=2, eps=EPS)
    mask = some_mask()
    out, weights = attn.attend(q, k, v, mask, need_weights=True)
    assert_same(out, cdist_reference(q, k, v, mask), (q, k, v))
    assert torch.all(weights.masked_select(~mask.expand_as(weights)) == 0)


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
def test_flex_euclid_forward_matches_cdist_formula(masked):
    pytest.importorskip("torch.nn.attention.flex_attention")
    q, k, v = (t.detach() for t in qkv(2))
    mask = some_mask() if masked else None
    torch.testing.assert_close(flex_euclid_attention(q, k, v, mask, 8**-0.5, EPS), cdist_reference(q, k, v, mask), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("causal", [False, True], ids=["dot", "causal"])
def test_sdpa_path_matches_explicit_with_masks(causal):
    """The fused dot path with a mask (and causal) gives the explicit path's values and gradients."""
    torch.manual_seed(3)
    attn = DotAttention(16, heads=2, causal=causal)
    x = torch.randn(2, 9, 16, requires_grad=True)
    mask = some_mask()
    fast, _ = attn(x, mask=mask)
    explicit, weights = attn(x, mask=mask, need_weights=True)
    assert_same(fast, explicit, (x, *attn.parameters()), atol=1e-5)
    full = mask & causal_mask(9) if causal else mask
    assert torch.all(weights.masked_select(~full.expand_as(weights)) == 0)


def test_euclid_picks_explicit_path_when_weights_are_requested(monkeypatch):
    calls = []
    monkeypatch.setattr(euclid, "tiled_euclid_attention", lambda q, *a: calls.append(q.shape) or torch.zeros_like(q))
    attn = EuclidAttention(8, heads=2)
    x = torch.randn(1, 256, 8)  # 256 x 256 scores: large enough for the tiled path
    _, none = attn(x)
    assert none is None and len(calls) == 1
    out, weights = attn(x, need_weights=True)
    assert len(calls) == 1 and weights.shape == (1, 2, 256, 256) and out.abs().sum() > 0


def test_euclid_path_selection():
    def t(length, cuda=False, d=64):
        return SimpleNamespace(is_cuda=cuda, shape=(8, 8, length, d))

    assert euclid_path(t(1024), t(1024), need_weights=False, dropout=0.0) == "tiled"
    assert euclid_path(t(1024, True), t(1024, True), need_weights=False, dropout=0.0) == "flex"
    assert euclid_path(t(1024, True, 49), t(1024, True, 49), need_weights=False, dropout=0.0) == "tiled"
    for cuda in (False, True):
        assert euclid_path(t(64, cuda), t(64, cuda), need_weights=False, dropout=0.0) == "small"
        assert euclid_path(t(64, cuda), t(64, cuda), need_weights=False, dropout=0.1) == "explicit"
        assert euclid_path(t(1024, cuda), t(1024, cuda), need_weights=True, dropout=0.0) == "explicit"
        assert euclid_path(t(1024, cuda), t(1024, cuda), need_weights=False, dropout=0.1) == "explicit"


def test_tiled_euclid_under_bfloat16_autocast():
    """The tiled path (256 x 256 scores) computes in float32, returns the input dtype, and its
    backward stays float32 even when called inside the autocast block."""
    torch.manual_seed(7)
    attn = EuclidAttention(16, heads=2)
    x = torch.randn(1, 256, 16, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fast, _ = attn(x)
        explicit, _ = attn(x, need_weights=True)
        grad_inside = torch.autograd.grad(fast.float().sum(), x, retain_graph=True)[0]
    assert fast.dtype == explicit.dtype == torch.bfloat16 and torch.isfinite(fast).all()
    torch.testing.assert_close(fast.float(), explicit.float(), atol=2e-2, rtol=2e-2)
    grad_outside, grad_explicit = (torch.autograd.grad(out.float().sum(), x)[0] for out in (fast, explicit))
    torch.testing.assert_close(grad_inside, grad_outside, atol=0, rtol=0)
    torch.testing.assert_close(grad_outside, grad_explicit, atol=3e-2, rtol=3e-2)


def test_euclid_scores_stay_float32_under_autocast():
    """1/eps = 1e9 overflows fp16: the explicit path scores in float32 whatever the input dtype."""
    q, k, v = (t.detach().to(torch.bfloat16) for t in qkv(4))
    attn = EuclidAttention(16, heads=2)  # eps = 1e-9
    out, weights = attn.attend(q, k, v, None, need_weights=True)
    assert torch.isfinite(out).all() and out.dtype == torch.bfloat16
    assert weights[:, :, 3, 3].float().min() > 0.99  # the identical key takes the weight


@pytest.mark.parametrize("length", [16, 256], ids=["small", "tiled"])
def test_compiled_network_runs_euclid_paths_as_is(length):
    """Under torch.compile the small path (on a CPU the kernel's ctypes calls, run between the compiled
    graphs) and the tiled path (its tiles are compiled already) give the eager numbers."""
    torch.manual_seed(8)
    attn = EuclidAttention(16, heads=2)
    x = torch.randn(1, length, 16, requires_grad=True)
    eager, _ = attn(x)
    compiled, _ = torch.compile(attn)(x)
    assert_same(compiled, eager, (x, *attn.parameters()), atol=1e-6)


def test_tiled_euclid_runs_uncompiled_where_compiling_fails(monkeypatch):
    """Without a working compiler the tile functions run eagerly, with one warning, and give the same numbers."""
    def failing_compile(fn):
        def compiled(*args):
            raise torch._dynamo.exc.BackendCompilerFailed(fn, RuntimeError("no C++ compiler"), None)
        return compiled

    monkeypatch.setattr(euclid_tiled.torch, "compile", failing_compile)
    tile_scores = euclid_tiled.fused(euclid_tiled.tile_scores)
    args = (torch.randn(2, 9, 4), torch.rand(2, 1, 4), torch.rand(2, 9, 1), None, 0.5, EPS)
    with pytest.warns(UserWarning, match="no C\\+\\+ compiler"):
        first = tile_scores(*args)
    for a, b in zip(first, euclid_tiled.tile_scores(*args)):
        torch.testing.assert_close(a, b)
    tile_scores(*args)  # eager from now on: no second attempt, no second warning
