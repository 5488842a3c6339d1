"""dot, l2 and cosine attention: the fused SDPA path equals the explicit formula (values and gradients, masks and
causal included), and the explicit formula equals a reference written from the definition."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnexp.errors import AttnexpError
from attnexp.mixers import CosineAttention, DotAttention, L2Attention

VARIANTS = {
    "dot": (DotAttention, {}),
    "l2": (L2Attention, {}),
    "l2 tied": (L2Attention, {"tied_qk": True}),
    "cosine learned": (CosineAttention, {}),
    "cosine t=1": (CosineAttention, {"temperature": 1.0}),
}


def some_mask(batch: int = 3, length: int = 9) -> torch.Tensor:
    mask = torch.rand(batch, 1, length, length, generator=torch.Generator().manual_seed(1)) > 0.3
    mask[..., 0] = True
    return mask


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_fused_path_equals_explicit_values_and_gradients(name, masked, causal):
    cls, options = VARIANTS[name]
    torch.manual_seed(0)
    attn = cls(16, heads=2, causal=causal, **options)
    x = torch.randn(3, 9, 16, requires_grad=True)
    mask = some_mask() if masked else None
    fused, none = attn(x, mask=mask)
    explicit, weights = attn(x, mask=mask, need_weights=True)
    assert none is None and weights.shape == (3, 2, 9, 9)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    params = [x, *attn.parameters()]
    grads_fused = torch.autograd.grad(fused.square().sum(), params)
    grads_explicit = torch.autograd.grad(explicit.square().sum(), params)
    for a, b in zip(grads_fused, grads_explicit):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    allowed = torch.ones(9, 9, dtype=torch.bool) if mask is None else mask.expand(3, 2, 9, 9)
    if causal:
        allowed = allowed & torch.ones(9, 9, dtype=torch.bool).tril()
    assert torch.all(weights.masked_select(~allowed.expand_as(weights)) == 0)


def test_l2_scores_are_negative_squared_distances():
    attn = L2Attention(8, heads=2, out_proj=False)
    q, k = torch.randn(2, 2, 5, 4), torch.randn(2, 2, 7, 4)
    torch.testing.assert_close(attn.score(q, k), -torch.cdist(q, k).square() / 2.0, atol=1e-5, rtol=1e-5)


def test_cosine_scores_are_scaled_cosine_similarities():
    attn = CosineAttention(8, heads=2, temperature=3.0)
    q, k = torch.randn(2, 2, 5, 4), torch.randn(2, 2, 7, 4)
    reference = F.cosine_similarity(q.unsqueeze(-2), k.unsqueeze(-3), dim=-1) * 3.0
    torch.testing.assert_close(attn.score(q, k), reference, atol=1e-5, rtol=1e-5)


def test_learned_temperature_starts_at_sqrt_d_is_trained_and_capped():
    attn = CosineAttention(32, heads=2)
    torch.testing.assert_close(attn.temperature().flatten(), torch.full((2,), math.sqrt(16.0)))
    assert attn.log_temperature.requires_grad and "log_temperature" in dict(attn.named_parameters())
    with torch.no_grad():
        attn.log_temperature.fill_(10.0)
    assert torch.all(attn.temperature() <= 100.0 + 1e-3)
    fixed = CosineAttention(32, heads=2, temperature=1.0)
    assert "log_temperature" not in dict(fixed.named_parameters())
    with pytest.raises(AttnexpError, match=r"model\.temperature=0 is not allowed"):
        CosineAttention(8, temperature=0)


def test_tied_projection_is_one_set_of_weights():
    tied, free = L2Attention(8, tied_qk=True), L2Attention(8)
    assert tied.k_proj is tied.q_proj
    assert sum(p.numel() for p in free.parameters()) - sum(p.numel() for p in tied.parameters()) == 8 * 8 + 8
