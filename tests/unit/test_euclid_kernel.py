"""The compiled CPU kernel of euclid attention against the formula and the torch path; its build cache and fallback."""

from __future__ import annotations

import pytest
import torch

from attnexp.attention import causal_mask, euclid_native
from attnexp.attention.euclid_native import NativeEuclidAttention
from attnexp.attention.euclid_small import SmallEuclidAttention, small_euclid_attention

from test_fast_paths import assert_same, cdist_reference

SHAPES = {  # (B, H, Lq, Lk, D): the patch models' sizes, then odd ones (no multiple of the kernel's 16 floats)
    "mnist": (4, 1, 16, 16, 49),
    "patch64": (3, 2, 64, 64, 16),
    "odd": (2, 3, 9, 9, 7),
    "cross": (2, 2, 5, 37, 20),
    "one-query": (3, 1, 1, 40, 8),
}


@pytest.fixture(autouse=True)
def kernel():
    if euclid_native.library() is None:
        pytest.skip("no C compiler here: the kernel cannot be built")


def inputs(b, h, lq, lk, d, seed=0):
    torch.manual_seed(seed)
    q, k, v = torch.randn(b, h, lq, d), torch.randn(b, h, lk, d), torch.randn(b, h, lk, d)
    k[:, :, 0] = q[:, :, 0]  # a key equal to its query: distance exactly 0, score 1/eps
    return [t.requires_grad_() for t in (q, k, v)]


def a_mask(b, lq, lk):
    """Random keys dropped, and a query that may attend to nothing.  # (B, 1, Lq, Lk)"""
    torch.manual_seed(3)
    mask = torch.rand(b, 1, lq, lk) > 0.4
    mask[..., 0] = True
    mask[-1, 0, -1] = False
    return mask


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_kernel_matches_formula_and_torch_path(shape, masked):
    """Values and gradients of q, k, v against the cdist formula and against the torch path (which is tighter)."""
    q, k, v = inputs(*shape)
    mask = a_mask(shape[0], shape[2], shape[3]) if masked else None
    scale = shape[-1] ** -0.5
    native = lambda: NativeEuclidAttention.apply(q, k, v, mask, scale, 1e-3)  # noqa: E731
    assert_same(native(), cdist_reference(q, k, v, mask), (q, k, v))
    assert_same(native(), SmallEuclidAttention.apply(q, k, v, mask, scale, 1e-3), (q, k, v), atol=1e-5)
    if masked:
        assert native()[-1, :, -1].eq(0).all()  # nothing to attend to: zeros


def test_kernel_is_the_default_on_cpu_and_causal_masks_match():
    q, k, v = inputs(2, 2, 16, 16, 8)
    mask = causal_mask(16)
    fast = small_euclid_attention(q, k, v, mask, 8**-0.5, 1e-9)
    assert fast.grad_fn.name().startswith("NativeEuclidAttention")
    assert_same(fast, cdist_reference(q, k, v, mask, eps=1e-9), (q, k, v))


def test_kernel_gives_the_same_bits_on_any_number_of_threads():
    q, k, v = inputs(5, 3, 16, 16, 12)
    grad = torch.randn(5, 3, 16, 12)
    results = []
    threads = torch.get_num_threads()
    try:
        for n in (1, 3):
            torch.set_num_threads(n)
            out = NativeEuclidAttention.apply(q, k, v, None, 0.3, 1e-9)
            results.append((out, *torch.autograd.grad(out, (q, k, v), grad)))
    finally:
        torch.set_num_threads(threads)
    for one, three in zip(*results):
        assert torch.equal(one, three)


def test_evaluation_and_a_gradient_for_v_alone_match_training():
    """Without grad (evaluation) the kernel skips the score's derivative: same output bits; with only v asking
    for a gradient, v's is the one training gives."""
    q, k, v = inputs(2, 2, 16, 16, 8)
    grad = torch.randn(2, 2, 16, 8)
    out = NativeEuclidAttention.apply(q, k, v, None, 0.3, 1e-9)
    dv = torch.autograd.grad(out, v, grad)[0]
    with torch.no_grad():
        assert torch.equal(NativeEuclidAttention.apply(q, k, v, None, 0.3, 1e-9), out)
    q, k = q.detach(), k.detach()
    only_v = NativeEuclidAttention.apply(q, k, v, None, 0.3, 1e-9)
    assert torch.equal(only_v, out)
    assert torch.equal(torch.autograd.grad(only_v, v, grad)[0], dv)


def test_nan_spreads_as_in_the_torch_path():
    """A NaN query poisons its own row; a NaN key every row that sees it: the divergence check sees the NaN loss."""
    q, k, v = (t.detach() for t in inputs(1, 1, 6, 6, 4))
    q[0, 0, 2, 1] = float("nan")
    k[0, 0, 4, 0] = float("nan")
    mask = torch.ones(1, 1, 6, 6, dtype=torch.bool)
    mask[..., 4] = False  # the NaN key is masked out: rows stay finite but query 2
    for m in (None, mask):
        native = NativeEuclidAttention.apply(q, k, v, m, 0.5, 1e-9)
        reference = SmallEuclidAttention.apply(q, k, v, m, 0.5, 1e-9)
        assert torch.equal(native.isnan(), reference.isnan())
    assert native.isnan().any(-1).squeeze().tolist() == [False, False, True, False, False, False]


def test_kernel_is_cached_and_a_missing_compiler_falls_back_with_one_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    euclid_native.library.cache_clear()
    try:
        assert euclid_native.library() is not None
        built = list(euclid_native.cache_dir().glob("euclid_kernel-*.so"))
        assert len(built) == 1 and built[0].parent == tmp_path / "cache" / "attnexp" / "kernels"

        monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
        euclid_native.library.cache_clear()
        assert euclid_native.library() is not None  # the cached build: nothing to compile

        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty"))
        euclid_native.library.cache_clear()
        with pytest.warns(RuntimeWarning, match="slower torch path.*no-such-compiler"):
            assert euclid_native.library() is None
        q, k, v = inputs(2, 1, 9, 9, 8)
        out = small_euclid_attention(q, k, v, None, 8**-0.5, 1e-3)
        assert out.grad_fn.name().startswith("SmallEuclidAttention")
        assert_same(out, cdist_reference(q, k, v), (q, k, v))
    finally:
        euclid_native.library.cache_clear()


def test_a_failing_compiler_is_not_run_again(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    compiler = tmp_path / "cc"
    compiler.write_text(f"#!/bin/sh\necho run >> {calls}\necho 'cc: error: unsupported option' >&2\nexit 1\n")
    compiler.chmod(0o755)
    monkeypatch.setenv("CC", str(compiler))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    try:
        for _ in range(2):  # two processes' first calls
            euclid_native.library.cache_clear()
            with pytest.warns(RuntimeWarning, match="unsupported option"):
                assert euclid_native.library() is None
            assert calls.read_text().split() == ["run"] * len(euclid_native.FLAG_SETS)
    finally:
        euclid_native.library.cache_clear()
