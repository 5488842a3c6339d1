"""Three mechanisms written from recent papers (tests/paper_mixers.py), each correct and with a first draft's bug: the
kit sees the parameters training reaches, a failure names the user's line, a trained network that reads later
tokens is caught, and a float64 module checks the formula to float64 rounding."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import pytest
import torch
from helpers import line_of
from paper_mixers import DecayOverflows, KeyConvAttention, KeyConvLeaks, Retention, SelectionNaN, SelectiveAttention
from pytorch_lightning.plugins.precision import Precision

from attnexp.mixers.conformance import Kit, Size, masks, run_checks
from attnexp.networks import LanguageModel
from attnexp.tasks import NextToken


def results(factory, size: Size | None = None) -> dict:
    return {r.name: r for r in run_checks(factory, size=size)}


@pytest.mark.parametrize("mixer", [KeyConvAttention, Retention, SelectiveAttention])
def test_the_correct_mechanisms_pass_every_check_at_moved_parameters_too(mixer):
    found = results(partial(mixer))
    failed = [f"{r.name}: {r.measured}" for r in found.values() if r.ok is False]
    assert not failed, failed
    assert "as small at 3 draws of parameters moved" in found["no causal leak"].measured


def test_a_leak_behind_an_identity_kernel_fails_the_kit_named_at_the_line_that_lets_it_in():
    """Finding: multi-token attention's key convolution, symmetric and initialised as the identity, passed all 14
    checks (they built it once, at its constructor's parameters) and trained to read the next token."""
    found = results(partial(KeyConvLeaks), Size(causal=True))
    leak_check = found["no causal leak"]
    assert leak_check.ok is False and leak_check.measured.startswith(
        "it leaks once its parameters move from their initial values: "
    ), leak_check.measured
    conv = line_of(KeyConvAttention, "F.conv2d(")  # the line where the next key's logit joins the score
    assert f"first in KeyConvLeaks, at {conv} in attend" in leak_check.measured, leak_check.measured
    assert (
        found["key padding invisible"].ok is False
        and "once its parameters move" in found["key padding invisible"].measured
    )
    assert all(r.ok is not False for n, r in found.items() if n not in ("no causal leak", "key padding invisible"))


def test_moved_parameters_are_seeded_alike_for_mixers_of_one_structure_and_move_every_parameter():
    from attnexp.mixers.conformance.kit import moved

    a, b = KeyConvLeaks(8, causal=True), KeyConvLeaks(8, causal=True)
    b.load_state_dict(a.state_dict())
    before = {k: v.clone() for k, v in a.state_dict().items()}
    with torch.no_grad():
        moved(0, 1)(a), moved(0, 1)(b)
    assert all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in before)
    assert all(not torch.equal(a.state_dict()[k], before[k]) for k in before)  # the identity kernel's zeros too
    with torch.no_grad():
        moved(0, 2)(b)
    assert not torch.equal(a.kernel, b.kernel)


@pytest.mark.parametrize(
    "values,typical,expected",
    [([0.0, 1.0, 0.0], 0.1, torch.tensor([0.0, 1.0, 0.0]).std()), ([1.0, 1.0], 0.1, 1.0), ([0.0, 0.0], 0.1, 0.1)],
    ids=["an identity kernel: its spread", "ones: their size", "zeros: the mixer's typical spread"],
)
def test_each_parameter_moves_by_its_own_scale(values, typical, expected):
    from attnexp.mixers.conformance.kit import own_scale

    assert own_scale(torch.tensor(values), typical) == pytest.approx(float(expected))


def test_the_leak_and_padding_checks_run_at_trained_parameters():
    """What the smoke run hands the kit: a mixer as training left it (here the kernel moved off the identity)."""
    from attnexp.mixers.conformance.kit import trained

    mixer = KeyConvLeaks(16, causal=True, num_tokens=6)
    with torch.no_grad():
        mixer.kernel[..., 2] = 0.3  # the next key's tap, as training moves it
    kit = Kit(partial(KeyConvLeaks), 0, Size(causal=True)).at(trained(mixer.state_dict()))
    ok, measured = masks.causal_leak(kit)
    assert ok is False and "on move earlier outputs" in measured and "once its" not in measured, measured
    right = KeyConvAttention(16, causal=True, num_tokens=6)
    right.load_state_dict(mixer.state_dict())
    assert masks.causal_leak(Kit(partial(KeyConvAttention), 0, Size(causal=True)).at(trained(right.state_dict())))[0]


def formula(mixer: Retention, x: torch.Tensor) -> torch.Tensor:
    """Retention, written as the paper's loop: out_i = sum_(j <= i) gamma^(i - j) (q_i . k_j) / sqrt(d) v_j."""
    q, k, v = (mixer._split(p(x)) for p in (mixer.q_proj, mixer.k_proj, mixer.v_proj))
    out = torch.zeros_like(q)
    for i in range(x.shape[1]):
        for j in range(i + 1):
            weight = mixer.gamma ** (i - j) * (q[..., i, :] * k[..., j, :]).sum(-1) / mixer.head_dim**0.5
            out[..., i, :] += weight[..., None] * v[..., j, :]
    return mixer.out_proj(out.transpose(1, 2).reshape(x.shape))


@pytest.mark.parametrize("path", ["auto", "recurrent"])
def test_retention_equals_a_float64_loop_of_its_formula_on_either_path(path):
    """Finding: the module cast q and k to float32 before score even in a float64 module, so a float64 check stopped
    at float32 rounding. Its parallel form runs under auto, its recurrent form by name."""
    torch.manual_seed(0)
    mixer = Retention(16, causal=True, heads=2, path=path).double().eval()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    assert mixer.path_for(x.device) == ("explicit" if path == "auto" else "recurrent")
    with torch.no_grad():
        torch.testing.assert_close(mixer(x)[0], formula(mixer, x), rtol=1e-12, atol=1e-12)
    fused = results(partial(Retention))["fused equals explicit"]
    assert fused.ok and "recurrent:" in fused.measured


def test_the_kit_names_the_line_that_made_infinite_weights():
    """Finding: a weights failure was named at the mixer's class line, not at the line that computed the weights."""
    found = results(partial(DecayOverflows), Size(3, 16, 19, 16))
    weights = found["weights as declared"]
    made = line_of(DecayOverflows, "decay = self.gamma**distance")
    assert weights.ok is False and f"(its first NaN or infinity made at {made}, in normalise)" in weights.measured
    assert results(partial(DecayOverflows))["weights as declared"].ok  # 6 tokens: the kit's default size passes


def test_a_nan_is_traced_to_the_line_that_made_it_and_masking_with_minus_inf_is_none():
    from attnexp.mixers.tracing import traced

    torch.manual_seed(0)
    mixer = SelectionNaN(16, causal=True).eval()
    trace, out = traced(lambda: mixer(torch.randn(2, 6, 16)))
    found = trace.first_nonfinite()
    assert out[0].isnan().any() and found is not None, found
    assert (found.mixer, f"{found.file}:{found.line}", found.function) == (
        "SelectionNaN",
        line_of(SelectionNaN, "return -chosen / chosen.amax"),
        "penalty",
    )
    right = SelectiveAttention(16, causal=True).eval()
    assert traced(lambda: right(torch.randn(2, 6, 16)))[0].first_nonfinite() is None


def language_model(mixer, seed: int = 0, **moved_kernel: float) -> SimpleNamespace:
    """A LightningModule's parts the causality check reads: a small language model of ``mixer``, a next-token task,
    the CPU and 32-bit precision."""
    torch.manual_seed(seed)
    net = LanguageModel(partial(mixer), vocab_size=11, context=8, dim=16, depth=2).eval()
    with torch.no_grad():
        for block in net.blocks:
            for tap, value in moved_kernel.items():
                block.mixer.kernel[..., int(tap[-1])] = value
    trainer = SimpleNamespace(precision_plugin=Precision(), precision="32-true")
    return SimpleNamespace(net=net, task=NextToken(), device=torch.device("cpu"), trainer=trainer)


def test_a_trained_network_that_reads_the_next_token_is_found_and_its_mixer_named():
    from attnexp.training.callbacks.causality import leak

    leaky = language_model(KeyConvLeaks, tap2=0.3)
    x = torch.randint(0, 11, (8, 8))
    found = leak(leaky, x, 1e-4)
    assert found["leak"] and found["largest_change"] > 1e-4, found
    assert "first mixer whose outputs moved while its inputs did not: layer 0, KeyConvLeaks (" in found["error"]
    right = leak(language_model(KeyConvAttention, tap2=0.3), x, 1e-4)
    assert right == {"largest_change": 0.0, "leak": False}


def test_the_check_changes_every_token_from_each_cut_on_and_none_before():
    from attnexp.training.callbacks.causality import later_tokens_changed

    x = torch.randint(0, 11, (4, 8))
    changed, cuts = later_tokens_changed(x, 11)
    assert cuts == [1, 3, 5, 7]
    for b, cut in enumerate(cuts):
        assert torch.equal(changed[b, :cut], x[b, :cut]) and (changed[b, cut:] != x[b, cut:]).all()


def test_the_causality_callback_records_its_result_and_leaves_the_random_state_and_weights_alone():
    from attnexp.training.callbacks.causality import CausalityCheck

    module = language_model(KeyConvLeaks, tap2=0.3)
    batches = [(torch.randint(0, 11, (16, 8)), torch.zeros(16, 8))]
    loader = torch.utils.data.DataLoader(list(zip(*batches[0])), batch_size=16, shuffle=True)
    trainer = SimpleNamespace(datamodule=SimpleNamespace(val_dataloader=lambda: loader), precision="32-true")
    record = SimpleNamespace(fields={})
    state, weights = torch.get_rng_state(), {k: v.clone() for k, v in module.net.state_dict().items()}
    CausalityCheck(record, test=True).on_test_start(trainer, module)
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(v, weights[k]) for k, v in module.net.state_dict().items())
    assert record.fields["causality"]["leak"] and record.fields["causality"]["weights"] == "the weights tested"
