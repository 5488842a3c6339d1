"""Every mixer on every path, as it trains: no host read or data-dependent shape (the meta device has no values to
read), and a NaN or inf in one example reaches no other example's output or input gradient."""

from __future__ import annotations

import pytest
import torch
from mixer_cases import CASES, IDS, B, C, L, build, masks


@pytest.mark.parametrize(("name", "path"), CASES, ids=IDS)
def test_forward_and_backward_run_on_the_meta_device(name, path):
    """Meta tensors have shapes and no values: `.item()`, `float(tensor)`, `nonzero()` or boolean-mask indexing on the
    path raise here, as they would stall a GPU at every call."""
    mixer = build(name, path, "meta")
    for mask in masks(name, "meta"):
        x = torch.randn(B, L, C, device="meta", requires_grad=True)
        out, _ = mixer(x, mask=mask)
        assert out.shape == (B, L, C) and out.device.type == "meta"
        out.sum().backward()
        assert x.grad.shape == x.shape


@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=["nan", "inf"])
@pytest.mark.parametrize(("name", "path"), CASES, ids=IDS)
def test_a_bad_value_in_one_example_reaches_no_other(name, path, bad):
    mixer = build(name, path)
    torch.manual_seed(1)
    clean = torch.randn(B, L, C)
    for mask in masks(name):
        results = []
        for poisoned in (False, True):
            x = clean.clone()
            if poisoned:
                x[0, 2, 3] = bad
            x.requires_grad_(True)
            out, _ = mixer(x, mask=mask)
            out[1:].square().sum().backward()
            results.append((out[1:].detach(), x.grad[1:]))
        (out, grad), (out_bad, grad_bad) = results
        assert torch.isfinite(out_bad).all() and torch.isfinite(grad_bad).all()
        torch.testing.assert_close(out_bad, out, rtol=0, atol=0)
        torch.testing.assert_close(grad_bad, grad, rtol=0, atol=0)
