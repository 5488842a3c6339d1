"""The attention variants compute exactly what their formulas say."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnexp.errors import AttnexpError
from attnexp.mixers import DotAttention, EuclidAttention, SigmoidAttention, SqueezeExcitation, causal_mask


def test_dot_matches_sdpa_and_torch_multihead():
    torch.manual_seed(0)
    ours = DotAttention(dim=16, heads=4)
    ref = torch.nn.MultiheadAttention(16, 4, batch_first=True)
    with torch.no_grad():
        for i, proj in enumerate((ours.q_proj, ours.k_proj, ours.v_proj)):
            proj.weight.copy_(ref.in_proj_weight[16 * i : 16 * (i + 1)])
            proj.bias.copy_(ref.in_proj_bias[16 * i : 16 * (i + 1)])
        ours.out_proj.load_state_dict(ref.out_proj.state_dict())
    x = torch.randn(3, 7, 16)
    fused, none = ours(x)
    explicit, weights = ours(x, need_weights=True)
    expected, expected_weights = ref(x, x, x)
    assert none is None
    torch.testing.assert_close(fused, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.mean(dim=1), expected_weights, atol=1e-6, rtol=1e-5)
    q, k, v = (ours._split(p(x)) for p in (ours.q_proj, ours.k_proj, ours.v_proj))
    torch.testing.assert_close(ours.attend(q, k, v, None, False)[0], F.scaled_dot_product_attention(q, k, v))


def test_worked_example():
    """Three 4-d inputs, 3-d projections, unscaled scores as in the well-known worked example."""
    x = torch.tensor([[1.0, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]])
    w_key = torch.tensor([[0.0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]])
    w_query = torch.tensor([[1.0, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]])
    w_value = torch.tensor([[0.0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]])
    values = x @ w_value
    rounded = torch.tensor([[0.0, 0.5, 0.5], [0, 1, 0], [0, 0.9, 0.1]])
    torch.testing.assert_close((rounded @ values)[0], torch.tensor([2.0, 7.0, 1.5]))

    attn = DotAttention(dim=3, heads=1, bias=False, out_proj=False)
    attn.q_proj = torch.nn.Linear(4, 3, bias=False)  # the example projects 4-d inputs to 3-d
    attn.k_proj = torch.nn.Linear(4, 3, bias=False)
    attn.v_proj = torch.nn.Linear(4, 3, bias=False)
    with torch.no_grad():
        attn.q_proj.weight.copy_(w_query.T * 3**0.5)  # cancels the 1/sqrt(d) scale: unscaled scores
        attn.k_proj.weight.copy_(w_key.T)
        attn.v_proj.weight.copy_(w_value.T)
    for need_weights in (False, True):
        out, weights = attn(x.unsqueeze(0), need_weights=need_weights)
        torch.testing.assert_close(out[0, 0], torch.tensor([1.937, 6.683, 1.595]), atol=1e-3, rtol=0)
    torch.testing.assert_close(weights[0, 0], rounded, atol=0.07, rtol=0)  # the article rounds to 1 digit


def euclid_reference(q, k, v, eps, mask=None):
    scores = 1.0 / (torch.cdist(q, k, compute_mode="donot_use_mm_for_euclid_dist") * q.shape[-1] ** -0.5 + eps)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ v


@pytest.mark.parametrize("heads", [1, 4])
def test_euclid_matches_formula(heads):
    torch.manual_seed(1)
    attn = EuclidAttention(dim=32, heads=heads, out_proj=False, eps=1e-3)
    x = torch.randn(2, 9, 32, requires_grad=True)
    out, _ = attn(x)
    q, k, v = (attn._split(p(x)) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    expected = euclid_reference(q, k, v, 1e-3).transpose(1, 2).reshape(2, 9, 32)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-4)
    (g1,) = torch.autograd.grad(out.sum(), x, retain_graph=True)
    (g2,) = torch.autograd.grad(expected.sum(), x)
    torch.testing.assert_close(g1, g2, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("cls", [DotAttention, EuclidAttention])
def test_causal_outputs_ignore_the_future(cls):
    torch.manual_seed(2)
    attn = cls(16, heads=2, causal=True)
    x = torch.randn(1, 8, 16)
    changed = x.clone()
    changed[:, 5:] = torch.randn(1, 3, 16)
    for need_weights in (False, True):
        a, _ = attn(x, need_weights=need_weights)
        b, _ = attn(changed, need_weights=need_weights)
        torch.testing.assert_close(a[:, :5], b[:, :5])
        assert not torch.allclose(a[:, 5:], b[:, 5:])


@pytest.mark.parametrize("cls", [DotAttention, EuclidAttention])
def test_masked_positions_get_exactly_zero_weight(cls):
    torch.manual_seed(3)
    attn = cls(8, heads=2)
    x = torch.randn(2, 6, 8)
    mask = torch.rand(2, 1, 6, 6) > 0.4
    mask[..., 0] = True
    _, weights = attn(x, mask=mask, need_weights=True)
    assert torch.all(weights.masked_select(~mask.expand_as(weights)) == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 6))
    fused, _ = attn(x, mask=mask)
    explicit, _ = attn(x, mask=mask, need_weights=True)
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=1e-5)
    assert torch.all(causal_mask(3) == torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]]).bool())


def test_euclid_mask_with_huge_scores():
    """A score of 1/eps = 1e9 must still be masked out: masking is -inf, not an additive -1e9."""
    attn = EuclidAttention(4, heads=1, out_proj=False)
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj):
            proj.weight.copy_(torch.eye(4)), proj.bias.zero_()
    x = torch.randn(1, 3, 4)
    x[0, 2] = x[0, 0]  # key 2 equals query 0: distance 0, score 1e9
    mask = torch.tensor([[True, True, False], [True, True, True], [True, True, True]])
    _, weights = attn(x, mask=mask, need_weights=True)
    assert weights[0, 0, 0, 2] == 0
    assert weights[0, 0, 0, 0] > 0.99


def test_se_gates_rescale_channels():
    torch.manual_seed(4)
    se = SqueezeExcitation(dim=8, reduction=2)
    x = torch.randn(3, 5, 8)
    out, gates = se(x, need_weights=True)
    assert gates.shape == (3, 8) and torch.all((gates > 0) & (gates < 1))
    torch.testing.assert_close(out, x * gates[:, None, :])
    expected = se.excite(x.mean(1))
    torch.testing.assert_close(gates, expected)


def test_bad_dims_are_explained():
    with pytest.raises(AttnexpError, match="not divisible by heads"):
        DotAttention(dim=10, heads=3)
    with pytest.raises(AttnexpError, match="heads must be between 1 and dim"):
        DotAttention(dim=4, heads=8)
    with pytest.raises(AttnexpError, match=r"model\.eps=0\.0 is not allowed"):
        EuclidAttention(dim=4, eps=0.0)
    with pytest.raises(AttnexpError, match=r"model\.heads=0 is not allowed"):
        DotAttention(dim=4, heads=0)


@pytest.mark.parametrize("dim,reduction,units", [(4, 4, 4), (2, 4, 2), (49, 4, 12), (64, 4, 16), (8, 1, 8)])
def test_se_bottleneck_keeps_at_least_four_units(dim, reduction, units):
    assert SqueezeExcitation(dim=dim, reduction=reduction).excite[0].out_features == units


def test_sigmoid_is_its_formula_with_b_minus_log_of_the_keys_each_row_sees():
    """sigmoid(q.k / sqrt(d) - log n): n is the number of keys a row may see under the causal and padding masks."""
    torch.manual_seed(5)
    attn = SigmoidAttention(8, heads=2, causal=True)
    x = torch.randn(2, 5, 8)
    padding = torch.tensor([[True] * 5, [True, True, True, False, False]])[:, None, None, :]  # (B, 1, 1, L)
    out, weights = attn(x, mask=padding, need_weights=True)
    q, k, v = (attn._split(p(x)) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
    allowed = padding & torch.ones(5, 5, dtype=torch.bool).tril()  # (B, 1, L, L)
    n = allowed.sum(-1, keepdim=True).clamp_min(1)  # row 3 of sample 1 sees 3 keys, not 4
    expected = torch.sigmoid(q @ k.transpose(-2, -1) / 4**0.5 - n.log()) * allowed
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(out, attn.out_proj((expected @ v).transpose(1, 2).reshape(2, 5, 8)))
    assert not torch.allclose(weights.sum(-1), torch.ones(2, 2, 5))  # rows are not distributions
    fused, _ = attn(x, mask=padding)  # without weights: the same formula (sigmoid has no fused path)
    torch.testing.assert_close(fused, out)


def test_sigmoid_takes_a_fixed_bias_and_refuses_one_that_is_not_a_number():
    torch.manual_seed(6)
    attn = SigmoidAttention(4, score_bias=-1.5)
    x = torch.randn(1, 3, 4)
    _, weights = attn(x, need_weights=True)
    q, k = attn._split(attn.q_proj(x)), attn._split(attn.k_proj(x))
    torch.testing.assert_close(weights, torch.sigmoid(q @ k.transpose(-2, -1) / 2 - 1.5))
    for bad in ("x", float("inf"), True):
        with pytest.raises(AttnexpError, match=r"model\.score_bias"):
            SigmoidAttention(4, score_bias=bad)


def test_a_fully_masked_row_of_sigmoid_gives_zeros():
    attn = SigmoidAttention(4, out_proj=False)
    mask = torch.tensor([[False, False, False], [True, True, True], [True, False, True]])
    for need_weights in (False, True):
        out, _ = attn(torch.randn(1, 3, 4), mask=mask, need_weights=need_weights)
        assert torch.all(out[0, 0] == 0) and torch.isfinite(out).all()
