"""Every variant in configs/model honours the one mixer contract: same constructor keywords, same call."""

from __future__ import annotations

import pytest
import torch
from helpers import model_factory, options

from attnexp.errors import AttnexpError

REQUEST = dict(dim=8, num_tokens=5, out_proj=True, heads=2, shared_over_channels=False)


@pytest.mark.parametrize("variant", options("model"))
def test_takes_every_request_and_returns_output_and_weights(variant):
    mixer = model_factory(variant)(**REQUEST)
    x = torch.randn(2, 5, 8)
    out, weights = mixer(x)
    assert out.shape == x.shape and weights is None
    out, weights = mixer(x, need_weights=True)
    assert out.shape == x.shape and (weights is None or weights.shape[0] == 2)


@pytest.mark.parametrize("variant", options("model"))
def test_causal_is_honoured_or_refused_with_a_reason(variant):
    torch.manual_seed(0)
    try:
        mixer = model_factory(variant)(**REQUEST, causal=True).eval()
    except AttnexpError as err:
        assert "cannot predict next tokens" in str(err)
        return
    x = torch.randn(2, 5, 8)
    later = x.clone()
    later[:, 3:] += 1.0
    torch.testing.assert_close(mixer(later)[0][:, :3], mixer(x)[0][:, :3])


@pytest.mark.parametrize("variant", options("model"))
def test_a_misspelt_option_is_not_ignored(variant):
    with pytest.raises(TypeError):
        model_factory(variant)(**REQUEST, hedas=2)
