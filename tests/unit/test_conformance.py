"""The conformance kit (attnexp-check) passes every built-in and published example mixer, at the size it is given,
and fails each broken one on the check that names its defect."""

from __future__ import annotations

from functools import partial

import pytest
from broken_mixers import (
    AttendDropsAToken,
    AttendOnly,
    CausalOnly,
    DeadParameter,
    DropsALastToken,
    DropsMaskWhenCausal,
    ExplicitPathDetached,
    FusedDisagrees,
    IgnoresHeads,
    IgnoresPadding,
    LeaksTheFuture,
    MixesTheBatch,
    NaiveSoftmax,
    NaNWeights,
    NegativeCalledNonNegative,
    SigmoidCalledSoftmax,
    SoftpickCountsPadding,
    Transposes,
    UnsafeExp,
    UnseededNoise,
)
from helpers import line_of, model_factory, options, published_factory

from attnexp.mixers.conformance import CHECKS, Size, run_checks

PUBLISHED = ["diff", "linear", "gau", "stickbreaking", "fox"]  # examples/published_attention


def verdicts(factory) -> dict[str, bool | None]:
    return {r.name: r.ok for r in run_checks(factory)}


@pytest.mark.parametrize("name", options("model"))
def test_every_built_in_mixer_passes(name):
    results = run_checks(model_factory(name))
    failed = [f"{r.name}: {r.measured}" for r in results if r.ok is False]
    assert not failed, failed
    assert len(results) == len(CHECKS) == 13 and all(r.measured for r in results)


@pytest.mark.parametrize(
    "size", [Size(), Size(2, 16, 19, 64, 4)], ids=["small default", "width 64, 4 heads, 16 tokens"]
)
@pytest.mark.parametrize("name", PUBLISHED)
def test_every_published_example_passes_at_two_sizes(name, size):
    """Signed weights (differential attention, its own attend and no score), distributions from a kernel (linear
    attention) and non-negative weights of any sum (the gated attention unit, one head) are each held to their kind."""
    size = size if name != "gau" else Size(size.batch, size.queries, size.keys, size.dim)  # one head
    results = {r.name: r for r in run_checks(published_factory(name), size=size)}
    failed = [f"{r.name}: {r.measured}" for r in results.values() if r.ok is False]
    assert not failed, failed
    kind = {"diff": "signed", "linear": "distributions", "gau": "non-negative"}.get(name, "")
    kind = {"stickbreaking": "non-negative", "fox": "distributions"}.get(name, kind)
    causal_only = name in ("stickbreaking", "fox")  # checked causal, so the layout of a non-causal call does not apply
    assert results["weights as declared"].measured.startswith(kind) and results["token layout"].ok is not causal_only
    assert f"({size.batch}, {size.queries}, {size.dim})" in results["shapes"].measured


def test_a_mixer_that_writes_attend_and_no_score_passes():
    """The contract's other way in: a mechanism that is no score and normaliser overrides attend."""
    failed = [f"{r.name}: {r.measured}" for r in run_checks(partial(AttendOnly)) if r.ok is False]
    assert not failed, failed


def test_a_signed_mixer_is_checked_as_signed():
    """Differential attention's weights are negative by design: they pass as signed, with their negative share."""
    weights = next(r for r in run_checks(published_factory("diff")) if r.name == "weights as declared")
    assert weights.ok and "signed" in weights.measured and "of the weight negative" in weights.measured


@pytest.mark.parametrize(
    "factory,defect",
    [
        (partial(LeaksTheFuture), "no causal leak"),
        (partial(IgnoresPadding), "key padding invisible"),
        (partial(NaiveSoftmax), "fully masked rows"),
        (partial(NaiveSoftmax), "mismatched shapes refused"),
        (partial(SigmoidCalledSoftmax), "weights as declared"),
        (partial(DeadParameter), "gradients"),
        (partial(FusedDisagrees, path="auto"), "fused equals explicit"),
        (partial(ExplicitPathDetached, path="auto"), "fused equals explicit"),
        (partial(MixesTheBatch), "batch independence"),
        (partial(DropsALastToken), "shapes"),
        (partial(Transposes), "shapes"),
        (partial(NaNWeights), "weights as declared"),
        (partial(NegativeCalledNonNegative), "weights as declared"),
        (partial(UnseededNoise), "same seed, same output"),
        (partial(UnsafeExp), "finite in bf16"),
        (partial(IgnoresHeads), "contract options"),
        (partial(SoftpickCountsPadding), "key padding invisible"),
        (partial(DropsMaskWhenCausal, causal=True), "key padding invisible"),
        (partial(AttendDropsAToken), "key padding invisible"),
    ],
    ids=[
        "leaks the future",
        "ignores padding",
        "NaN on a fully masked row",
        "broadcasts another batch",
        "sigmoid called a distribution",
        "dead parameter",
        "fused path disagrees",
        "explicit path without a gradient",
        "mixes the batch",
        "drops a token",
        "transposes its output",
        "NaN weights",
        "negative weights not declared signed",
        "unseeded noise",
        "exp overflows in bf16",
        "ignores heads",
        "counts padded keys",
        "drops the mask when causal",
        "a broken shape is no refusal of masks",
    ],
)
def test_a_broken_mixer_fails_on_the_check_that_names_its_defect(factory, defect):
    found = verdicts(factory)
    assert found[defect] is False, found


def test_a_leak_is_measured_where_it_happens():
    leak = next(r for r in run_checks(partial(LeaksTheFuture)) if r.name == "no causal leak")
    assert "tokens from 1 on move earlier outputs" in leak.measured


def test_a_zero_gradient_is_accepted_only_where_the_output_ignores_the_parameter():
    """Softmax ignores a key bias (every score of a row moves alike); a parameter nothing uses is a defect."""
    dot = next(r for r in run_checks(model_factory("dot")) if r.name == "gradients")
    assert dot.ok and "ignores the parameter: k_proj.bias" in dot.measured
    dead = next(r for r in run_checks(partial(DeadParameter)) if r.name == "gradients")
    assert "no gradient: unused" in dead.measured


def test_a_mixer_that_cannot_do_something_says_so_and_passes():
    mlp = {r.name: r for r in run_checks(model_factory("mlp"))}
    assert mlp["no causal leak"].ok and "causal refused" in mlp["no causal leak"].measured
    assert mlp["key padding invisible"].ok and "masks refused" in mlp["key padding invisible"].measured
    assert mlp["fused equals explicit"].ok is None and mlp["weights as declared"].ok is None


def test_an_output_in_another_layout_is_caught_where_width_and_length_are_equal():
    """(B, C, L) returned for (B, L, C) has the right shape when C = L: the layout check and the longer length
    catch it."""
    found = {r.name: r for r in run_checks(partial(Transposes), size=Size(3, 8, 11, 8))}
    assert found["token layout"].ok is False and found["shapes"].ok is False, found
    line = line_of(Transposes, "out.transpose(1, 2)")
    assert f"self, 9 tokens: output (3, 8, 9) (computed at {line}, in forward), expected (B, Lq, C) = (3, 9, 8)" in (
        found["shapes"].measured
    ), found["shapes"].measured


def test_a_shape_error_names_the_mixer_the_expected_and_the_actual_shape():
    shapes = next(r for r in run_checks(partial(DropsALastToken)) if r.name == "shapes")
    line = line_of(DropsALastToken, "out[:, :-1]")
    assert shapes.measured.startswith("DropsALastToken returned"), shapes.measured
    assert f"output (3, 5, 16) (computed at {line}, in forward), expected (B, Lq, C) = (3, 6, 16)" in shapes.measured


def test_nan_weights_are_reported_apart_from_negative_ones():
    nan = next(r for r in run_checks(partial(NaNWeights)) if r.name == "weights as declared")
    assert "18 NaN or infinite weights" in nan.measured and "negative weights" not in nan.measured, (
        nan.measured
    )  # 3 x 6 rows
    negative = next(r for r in run_checks(partial(NegativeCalledNonNegative)) if r.name == "weights as declared")
    assert 'negative weights (weights that may be negative say weight_kind = "signed")' in negative.measured
    assert "NaN" not in negative.measured, negative.measured


def test_the_checks_run_at_the_size_they_are_given():
    results = {r.name: r.measured for r in run_checks(model_factory("dot"), size=Size(2, 5, 7, 12, 3))}
    assert "(2, 5, 12) and at 6 tokens, cross-attention from 7 keys" in results["shapes"]
    assert results["contract options"].startswith("5 honoured")  # heads=2 too: it divides 12


def test_a_check_that_raises_fails_pointing_into_the_mixers_code():
    """An error inside the mixer fails the check with the mixer's class and the line that raised it."""
    from attnexp.mixers import DotAttention

    class ScoreRaises(DotAttention):
        def score(self, q, k):
            raise RuntimeError("no score here")

    shapes = next(r for r in run_checks(partial(ScoreRaises)) if r.name == "shapes")
    assert shapes.ok is False and "raised RuntimeError: no score here" in shapes.measured
    assert (
        "(in ScoreRaises, at " in shapes.measured
        and "test_conformance.py:" in shapes.measured
        and shapes.measured.endswith("in score)")
    )


def test_a_causal_only_mixer_passes_checked_under_causal_masks():
    """Finding: a correct mixer that refuses to be built non-causal failed the token layout check (built
    non-causal before its permutation_equivariant = False was read). Its declaration makes every check causal;
    the checks that need a non-causal call say n/a or are checked on the calls it takes."""
    found = {r.name: r for r in run_checks(partial(CausalOnly))}
    failed = [f"{r.name}: {r.measured}" for r in found.values() if r.ok is False]
    assert not failed, failed
    assert found["token layout"].ok is None and "non-causal refused" in found["token layout"].measured
    assert "(causal self-attention)" in found["key padding invisible"].measured
    assert "2 of 4 cases" in found["fused equals explicit"].measured  # causal, with and without padding


def test_the_padding_check_counts_the_padded_keys():
    """Finding: softpick, whose denominator counts every hidden key, passed: the check changed the hidden keys'
    contents, never their number."""
    padding = next(r for r in run_checks(partial(SoftpickCountsPadding)) if r.name == "key padding invisible")
    assert padding.ok is False and "in contents or number" in padding.measured, padding.measured


def test_the_padding_check_sees_past_a_causal_mask():
    """Finding: under a causal mask padding after the tokens is invisible anyway, so a causal mixer that dropped the
    mask passed; padding before the tokens is what a causal layer's queries could see."""
    size = Size(causal=True)
    found = {r.name: r for r in run_checks(partial(DropsMaskWhenCausal), size=size)}
    assert found["key padding invisible"].ok is False, found["key padding invisible"].measured
    assert found["no causal leak"].ok and found["batch independence"].ok


def test_a_shape_broken_inside_the_mixer_names_the_users_method_not_attnexps_line():
    """Finding: an attend returning one token too few was named at attnexp/mixers/multihead.py with a raw reshape
    error."""
    shapes = next(r for r in run_checks(partial(AttendDropsAToken)) if r.name == "shapes")
    assert shapes.ok is False and "AttendDropsAToken.attend (" in shapes.measured, shapes.measured
    assert "broken_mixers.py:" in shapes.measured and "expected (B, H, Lq, D) = (3, 1, 6, 16)" in shapes.measured
    assert "multihead.py" not in shapes.measured
