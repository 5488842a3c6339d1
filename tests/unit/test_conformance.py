"""The conformance kit (attnexp-check) passes every built-in mixer and fails each broken one on the check that
names its defect."""

from __future__ import annotations

from functools import partial

import pytest
from broken_mixers import (
    DeadParameter,
    DropsALastToken,
    FusedDisagrees,
    IgnoresHeads,
    IgnoresPadding,
    LeaksTheFuture,
    MixesTheBatch,
    NaiveSoftmax,
    SigmoidCalledSoftmax,
    UnsafeExp,
    UnseededNoise,
)
from helpers import model_factory, options

from attnexp.mixers.conformance import run_checks


def verdicts(factory) -> dict[str, bool | None]:
    return {r.name: r.ok for r in run_checks(factory)}


@pytest.mark.parametrize("name", options("model"))
def test_every_built_in_mixer_passes(name, one_thread):
    results = run_checks(model_factory(name))
    failed = [f"{r.name}: {r.measured}" for r in results if r.ok is False]
    assert not failed, failed
    assert len(results) == 12 and all(r.measured for r in results)


@pytest.mark.parametrize("factory,defect", [
    (partial(LeaksTheFuture), "no causal leak"),
    (partial(IgnoresPadding), "key padding invisible"),
    (partial(NaiveSoftmax), "fully masked rows"),
    (partial(NaiveSoftmax), "mismatched shapes refused"),
    (partial(SigmoidCalledSoftmax), "weights as declared"),
    (partial(DeadParameter), "gradients"),
    (partial(FusedDisagrees, path="auto"), "fused equals explicit"),
    (partial(MixesTheBatch), "batch independence"),
    (partial(DropsALastToken), "shapes"),
    (partial(UnseededNoise), "same seed, same output"),
    (partial(UnsafeExp), "finite in bf16"),
    (partial(IgnoresHeads), "contract options"),
], ids=["leaks the future", "ignores padding", "NaN on a fully masked row", "broadcasts another batch",
        "sigmoid called a distribution", "dead parameter", "fused path disagrees", "mixes the batch",
        "drops a token", "unseeded noise", "exp overflows in bf16", "ignores heads"])
def test_a_broken_mixer_fails_on_the_check_that_names_its_defect(factory, defect, one_thread):
    found = verdicts(factory)
    assert found[defect] is False, found


def test_a_leak_is_measured_where_it_happens(one_thread):
    leak = next(r for r in run_checks(partial(LeaksTheFuture)) if r.name == "no causal leak")
    assert "tokens from 1 on move earlier outputs" in leak.measured


def test_a_zero_gradient_is_accepted_only_where_the_output_ignores_the_parameter(one_thread):
    """Softmax ignores a key bias (every score of a row moves alike); a parameter nothing uses is a defect."""
    dot = next(r for r in run_checks(model_factory("dot")) if r.name == "gradients")
    assert dot.ok and "ignores the parameter: k_proj.bias" in dot.measured
    dead = next(r for r in run_checks(partial(DeadParameter)) if r.name == "gradients")
    assert "no gradient: unused" in dead.measured


def test_a_mixer_that_cannot_do_something_says_so_and_passes(one_thread):
    mlp = {r.name: r for r in run_checks(model_factory("mlp"))}
    assert mlp["no causal leak"].ok and "causal refused" in mlp["no causal leak"].measured
    assert mlp["key padding invisible"].ok and "masks refused" in mlp["key padding invisible"].measured
    assert mlp["fused equals explicit"].ok is None and mlp["weights as declared"].ok is None
