"""The language model: no variant sees the future, every variant learns the toy corpus, prompts are explained."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from helpers import causal_mixers, model_factory
from omegaconf import OmegaConf

from attnexp.cli.build import network as build_net
from attnexp.cli.prediction import encode_prompt
from attnexp.cli.train import CONFIG_DIR
from attnexp.data import Vocabulary
from attnexp.errors import AttnexpError, explain, root_cause
from attnexp.networks import LanguageModel
from attnexp.networks.positions import SinusoidalPositions


def mixer(variant: str, **overrides):
    """The variant's factory exactly as its config builds it (the configs ask for causal=false)."""
    return model_factory(variant, **overrides)


CAUSAL_VARIANTS = causal_mixers()  # discovered from configs/model


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
@pytest.mark.parametrize("variant", CAUSAL_VARIANTS)
def test_no_variant_sees_later_tokens(variant, positions):
    torch.manual_seed(0)
    net = LanguageModel(
        mixer(variant, heads=2), vocab_size=11, context=9, dim=16, depth=2, dropout=0.0, positions=positions
    ).eval()
    x = torch.randint(0, 11, (3, 9))
    for need_weights in (False, True):
        logits = net(x, need_weights=need_weights)
        logits = logits[0] if need_weights else logits
        for i in range(8):
            changed = x.clone()
            changed[:, i + 1 :] = (x[:, i + 1 :] + torch.randint(1, 11, (3, 8 - i))) % 11  # every later token differs
            after = net(changed, need_weights=need_weights)
            after = after[0] if need_weights else after
            torch.testing.assert_close(after[:, : i + 1], logits[:, : i + 1], rtol=1e-5, atol=1e-5)
            assert not torch.allclose(after[:, i + 1 :], logits[:, i + 1 :])  # the change did reach later positions


def test_mlp_is_refused_with_a_reason():
    lm = OmegaConf.load(Path(CONFIG_DIR) / "net" / "lm.yaml")
    lm.mixer = {"_target_": "attnexp.mixers.DenseMixer", "_partial_": True}
    with pytest.raises(Exception) as err:  # Hydra wraps it; the CLI shows the innermost explained error
        build_net(lm, {"vocab_size": 5, "context": 4})
    assert isinstance(root_cause(err.value), AttnexpError)
    assert re.search(r"mlp token mixer cannot predict next tokens.*can be causal, e.g. model=dot", explain(err.value))


def test_sinusoidal_positions():
    table = SinusoidalPositions(length=6, dim=5)(6)  # odd width works too
    position = torch.arange(6.0)
    torch.testing.assert_close(table[:, 0], torch.sin(position))
    torch.testing.assert_close(table[:, 1], torch.cos(position))
    torch.testing.assert_close(table[:, 2], torch.sin(position / 10000 ** (2 / 5)))
    assert table.shape == (6, 5)


def test_net_that_does_not_fit_the_data_is_explained():
    patch = OmegaConf.load(Path(CONFIG_DIR) / "net" / "patch.yaml")
    patch.mixer = None
    with pytest.raises(AttnexpError, match=r"does not fit this data.*takes no \['context', 'vocab_size'\].*net=lm"):
        build_net(patch, {"vocab_size": 10, "context": 8})


def test_prompt_unknown_words_warn_and_only_unknown_words_fail(capsys):
    vocab = Vocabulary.build(["[bos]", "el", "perro", "come"], "word")
    ids = encode_prompt("[bos] el zorro", vocab)
    assert vocab.decode(ids.tolist()) == ["[bos]", "el", "[unk]"]
    assert "read as [unk]: 'zorro'" in capsys.readouterr().err
    with pytest.raises(AttnexpError, match=r"has no token the model knows.*e\.g\. "):
        encode_prompt("zorro lobo", vocab)


def test_embed_dropout_drops_the_embeddings_only():
    """Zoology's recipe: dropout on the embeddings, none on the residual branches (``net.embed_dropout``)."""
    torch.manual_seed(0)
    net = LanguageModel(
        mixer("dot", heads=2),
        vocab_size=11,
        context=9,
        dim=16,
        depth=2,
        mlp_ratio=0,
        dropout=0.0,
        embed_dropout=0.5,
        positions="learned",
    ).train()
    x = torch.randint(0, 11, (3, 9))
    embedded = []
    net.drop.register_forward_hook(lambda module, args, out: embedded.append((args[0], out)))
    net(x), net(x)
    (first_in, first_out), (second_in, second_out) = embedded
    assert torch.equal(first_in, second_in) and not torch.equal(first_out, second_out)  # the embeddings are dropped
    assert float((first_out == 0).float().mean()) == pytest.approx(0.5, abs=0.15)
    assert all(block.drop.p == 0.0 for block in net.blocks)
    default = LanguageModel(mixer("dot", heads=2), vocab_size=11, context=9, dim=16, dropout=0.2)
    assert default.drop.p == 0.2 and all(block.drop.p == 0.2 for block in default.blocks)  # null: net.dropout
    with pytest.raises(AttnexpError, match=r"net\.embed_dropout=1\.5 is not allowed"):
        LanguageModel(mixer("dot", heads=2), vocab_size=11, context=9, dim=16, embed_dropout=1.5)
