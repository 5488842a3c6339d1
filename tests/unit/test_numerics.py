"""Attention stays finite at its edges: zero distances, mixed precision, fully masked rows."""

from __future__ import annotations

import pytest
import torch

from attnexp.mixers import DotAttention, EuclidAttention


def identity_attention(cls, dim=8, heads=2, **kwargs):
    attn = cls(dim, heads=heads, out_proj=False, **kwargs)
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
            proj.weight.copy_(torch.eye(dim)), proj.bias.zero_()
    return attn


@pytest.mark.parametrize("need_weights", [False, True])
def test_euclid_identical_rows_stay_finite(need_weights):
    """Distance 0 gives the score 1/eps = 1e9: all weight goes to exact matches, gradients stay finite."""
    attn = identity_attention(EuclidAttention)
    x = torch.randn(2, 5, 8)
    x[:, 3] = x[:, 1]  # tokens 1 and 3 are identical: each matches itself and the other exactly
    x.requires_grad_(True)
    out, weights = attn(x, need_weights=True)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(weights[:, :, 1, 1] + weights[:, :, 1, 3], torch.ones(2, 2))
    torch.testing.assert_close(weights[:, :, 0, 0], torch.ones(2, 2))  # every token is its own exact match
    out, _ = attn(x, need_weights=need_weights)
    out.square().sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in attn.parameters())


@pytest.mark.parametrize("cls", [DotAttention, EuclidAttention])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mixed_precision_is_finite(cls, dtype):
    torch.manual_seed(0)
    attn = cls(16, heads=2)
    x = torch.randn(2, 6, 16, requires_grad=True)
    x_same = x.detach().clone()
    x_same[:, 2] = x_same[:, 0]
    for inputs in (x, x_same.requires_grad_(True)):
        for need_weights in (False, True):
            with torch.autocast("cpu", dtype=dtype):
                out, _ = attn(inputs, need_weights=need_weights)
            assert torch.isfinite(out).all()
            out.float().sum().backward()
            assert torch.isfinite(inputs.grad).all() and all(torch.isfinite(p.grad).all() for p in attn.parameters())


@pytest.mark.parametrize("cls", [DotAttention, EuclidAttention])
def test_fully_masked_rows_give_zeros(cls):
    x = torch.randn(2, 4, 8, requires_grad=True)
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    mask[0, :, 2] = False  # query 2 of sample 0 may attend to nothing (e.g. padding)
    attn = cls(8, heads=2, out_proj=False)
    for need_weights in (False, True):
        out, weights = attn(x, mask=mask, need_weights=need_weights)
        assert torch.all(out[0, 2] == 0) and torch.isfinite(out).all()
        if need_weights:
            assert torch.all(weights[0, :, 2] == 0)
        out.sum().backward()
        assert torch.isfinite(x.grad).all()
