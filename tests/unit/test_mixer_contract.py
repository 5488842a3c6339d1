"""Every variant in configs/model honours the one mixer contract: same constructor keywords, same call."""

from __future__ import annotations

import pytest
import torch
from helpers import compose_cfg, line_of, model_factory, options
from omegaconf import open_dict

from attnexp.cli.values import check_values as check_config
from attnexp.errors import AttnexpError
from attnexp.mixers import build_mixer

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


def test_a_mixers_options_are_its_own_not_a_table_keyed_by_name(tmp_path):
    """A mixer of another package may call its options eps, reduction or dropout and mean something else by them."""
    cfg = compose_cfg(["model=dot"], tmp_path)
    with open_dict(cfg):
        cfg.model._target_ = "mine_attention.MineAttention"
        cfg.model.eps, cfg.model.reduction, cfg.model.dropout = 0.0, 0.5, 2.0
    check_config(cfg)  # nothing refused: the mixer checks its options when it is built


def test_an_argument_with_integer_keys_is_checked_not_crashed_on(tmp_path):
    """``+data.weights={0:1.0,1:2.0}`` gives a node with int keys: the rules look them up as they are."""
    cfg = compose_cfg(["+data.weights={0:1.0,1:2.0}"], tmp_path)
    assert list(cfg.data.weights) == [0, 1]
    check_config(cfg)
    with open_dict(cfg):
        cfg.data.batch_size = 0
    with pytest.raises(AttnexpError, match="batch_size"):
        check_config(cfg)


class OutsideMixer(torch.nn.Module):
    """A mixer of another package that follows the call contract without the package's base classes."""

    def __init__(
        self, dim, *, num_tokens=None, causal=False, out_proj=True, heads=1, shared_over_channels=False, gain=1.0
    ):
        super().__init__()
        self.proj, self.heads = torch.nn.Linear(dim, dim), heads

    def forward(self, x, context=None, mask=None, need_weights=False):
        return self.proj(x), None


def test_networks_build_every_mixer_through_the_contract_so_outside_ones_are_found():
    """Telemetry and HParams find mixers by the requests they received: an outside class gets them too."""
    from functools import partial

    from attnexp.mixers import is_mixer
    from attnexp.networks import LanguageModel, VisionTransformer

    vit = VisionTransformer(partial(OutsideMixer, heads=2, gain=0.5), 8, 1, 2, 10, dim=16, depth=3)
    found = [m for m in vit.modules() if is_mixer(m)]
    assert len(found) == 3 and all(isinstance(m, OutsideMixer) for m in found)
    assert found[0].request.dim == 16 and found[0].request.heads == 2 and found[0].request.num_tokens == 17
    lm = LanguageModel(partial(OutsideMixer), vocab_size=11, context=6, dim=8, depth=2)
    assert [m.request.causal for m in lm.modules() if is_mixer(m)] == [True, True]
    dot = model_factory("dot")(**REQUEST)
    assert build_mixer(model_factory("dot"), **REQUEST).request == dot.request  # a TokenMixer keeps its own


def test_a_mixer_says_what_its_weights_are_in_either_spelling():
    """weight_kind, or the older flag distributions (True: distributions, False: non-negative), whichever the nearest
    class sets; a kind that is none of the three is refused when the mixer is built."""
    from attnexp.mixers import DotAttention, TokenMixer, weight_kind

    class OldFlagOff(DotAttention):
        distributions = False

    class OldFlagOn(TokenMixer):
        distributions = True

    class Signed(OldFlagOff):
        weight_kind = "signed"

    class Misspelt(DotAttention):
        weight_kind = "signd"

    assert [weight_kind(c(8)) for c in (DotAttention, OldFlagOff, OldFlagOn, Signed, TokenMixer)] == [
        "distributions",
        "non-negative",
        "distributions",
        "signed",
        "non-negative",
    ]
    with pytest.raises(AttnexpError, match="'signd' is not a kind of weights"):
        build_mixer(Misspelt, dim=8)


def test_a_network_refuses_a_mixer_output_of_another_shape_naming_both_shapes():
    """A mixer that drops a token stops at its own call, named, not at the head's matrix product."""
    from functools import partial

    from broken_mixers import DropsALastToken

    from attnexp.errors import MixerError
    from attnexp.networks import PatchClassifier

    net = PatchClassifier(partial(DropsALastToken), image_size=8, channels=1, patch_size=2, num_classes=10)
    with pytest.raises(MixerError) as raised:
        net(torch.randn(2, 16, 4))
    message = str(raised.value)
    assert message.startswith("DropsALastToken.forward (") and "broken_mixers.py:" in message
    computed = f"(computed at {line_of(DropsALastToken, 'out[:, :-1]')}, in forward)"
    assert f"returned an output of shape (2, 15, 4) {computed} for tokens of shape (2, 16, 4)" in message, message


def test_an_error_inside_a_mixer_is_explained_with_its_class_and_line():
    """A run reports what fails inside a mixer (any error type) with the mixer's class and the line that raised it."""
    from functools import partial

    from broken_mixers import FailsInTraining

    from attnexp.errors import MixerError, is_bad_input
    from attnexp.mixers.faults import explain_mixer_failure
    from attnexp.networks import PatchClassifier

    net = PatchClassifier(partial(FailsInTraining), image_size=8, channels=1, patch_size=2, num_classes=10)
    with pytest.raises(RuntimeError) as raised:
        net(torch.randn(2, 16, 4))
    explained = explain_mixer_failure(raised.value)
    assert isinstance(explained, MixerError) and not is_bad_input(explained) and explained.__cause__ is raised.value
    assert str(explained).startswith("the mixer FailsInTraining raised RuntimeError: this mixer cannot train (at ")
    assert "broken_mixers.py:" in str(explained) and str(explained).endswith("in forward).")
    unrelated = ValueError("not a mixer's")
    assert explain_mixer_failure(unrelated) is unrelated


def test_a_causal_only_mixer_is_refused_non_causal_and_built_causal():
    """One documented attribute, ``causal_only``: the contract refuses the mixer where a network asks for it
    non-causal (bad input, with the fix), whatever the mixer's own constructor does."""
    from functools import partial

    from attnexp.mixers import DotAttention
    from attnexp.mixers.contract import make_mixer

    class Declared(DotAttention):
        causal_only = True

    with pytest.raises(AttnexpError, match=r"Declared attends causally only .* set model\.causal=true"):
        make_mixer(partial(Declared), dim=8)
    assert make_mixer(partial(Declared), dim=8, causal=True).causal
    assert make_mixer(partial(Declared, causal=True), dim=8).causal  # its config's causal: true


def test_the_tokens_hook_hands_a_mixer_its_inputs_and_what_it_returns_reaches_score():
    """A gate computed from each token's input (the Forgetting Transformer's): what ``tokens`` returns reaches this
    call's ``score`` (and the fused path), nothing kept on the mixer between calls."""
    from attnexp.mixers import DotAttention

    seen = []

    class KeyBias(DotAttention):
        fused_paths = ()

        def tokens(self, x, context):
            seen.append(x)
            return context.sum(-1)  # (B, Lk): one bias per key, from its token

        def score(self, q, k, tokens):
            return super().score(q, k) + tokens[:, None, None, :]

    torch.manual_seed(0)
    mixer, x = KeyBias(8), torch.randn(2, 5, 8)
    weights = mixer(x, need_weights=True)[1]
    assert len(seen) == 1 and seen[0] is x
    q, k = (mixer._split(p(x)) for p in (mixer.q_proj, mixer.k_proj))
    expected = (q @ k.transpose(-2, -1) * 8**-0.5 + x.sum(-1)[:, None, None, :]).softmax(-1)
    torch.testing.assert_close(weights, expected)
    assert not [name for name, value in vars(mixer).items() if isinstance(value, torch.Tensor)]


@pytest.mark.parametrize(
    "name,method,shape,source",
    [
        (
            "AttendDropsAToken",
            "attend",
            "an output of shape (2, 1, 15, 4){}: expected (B, H, Lq, D) = (2, 1, 16, 4)",
            "(weights @ v)[:, :, :-1]",
        ),
        (
            "ScoreDropsAKey",
            "score",
            "scores of shape (2, 1, 16, 15){}: expected (B, H, Lq, Lk) = (2, 1, 16, 16)",
            "super().score(q, k)[..., :-1]",
        ),
        (
            "NormaliseDropsAKey",
            "normalise",
            "weights of shape (2, 1, 16, 15){}: expected (B, H, Lq, Lk)",
            "scores[..., :-1].softmax(-1)",
        ),
    ],
)
def test_a_broken_shape_is_named_at_the_users_method_and_line(name, method, shape, source):
    """Finding: an attend returning one token too few was reported at attnexp/mixers/multihead.py as a raw reshape
    error; each method a mixer writes is held to its shape where it returns, and the line that computed the wrong
    shape is named (it was the method's first line)."""
    from functools import partial

    import broken_mixers

    from attnexp.errors import MixerError
    from attnexp.networks import PatchClassifier

    net = PatchClassifier(partial(getattr(broken_mixers, name)), image_size=8, channels=1, patch_size=2, num_classes=10)
    with pytest.raises(MixerError) as raised:
        net(torch.randn(2, 16, 4), need_weights=True)
    message = str(raised.value)
    computed = f" (computed at {line_of(getattr(broken_mixers, name), source)}, in {method})"
    assert message.startswith(f"{name}.{method} (") and shape.format(computed) in message, message


def test_an_error_while_a_mixer_is_built_names_it_and_its_line_and_is_no_bad_input():
    """Finding: a ValueError of a constructor's own code was called bad input (exit 2, its folder and traceback
    removed), a NameError there named no class, file or line, and the kit blamed the network that built it."""
    from functools import partial

    from broken_mixers import BuiltWithABug, CausalOnly

    from attnexp.errors import MixerError, is_bad_input
    from attnexp.mixers.faults import explain_mixer_failure
    from attnexp.networks import PatchClassifier

    def error(factory):
        with pytest.raises(Exception) as raised:
            PatchClassifier(factory, image_size=8, channels=1, patch_size=2, num_classes=10)
        return explain_mixer_failure(raised.value)

    bug = error(partial(BuiltWithABug))
    assert isinstance(bug, MixerError) and not is_bad_input(bug)
    assert str(bug).startswith("the mixer BuiltWithABug raised ValueError while it was built: invalid literal")
    assert "broken_mixers.py:" in str(bug) and str(bug).endswith("in __init__).") and "PatchClassifier" not in str(bug)
    misspelt = error(partial(BuiltWithABug, hedas=2))  # an option it does not take: what the user typed
    assert not isinstance(misspelt, MixerError) and is_bad_input(misspelt)
    refused = error(partial(CausalOnly))  # a refusal, saying why: bad input
    assert is_bad_input(refused) and "attends causally only" in str(refused)
