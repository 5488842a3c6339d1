"""Four sub-quadratic families a user writes (tests/linear_mixers.py) through the kit: the correct ones pass at the
kit's size and at a language model's; each broken copy fails on the check that names its defect, at its line; a NaN
is reported as a NaN."""

from __future__ import annotations

from functools import partial

import pytest
from helpers import line_of
from linear_mixers import (
    Based,
    BatchCentred,
    ChunkedSSD,
    ChunkedSSDReadsAhead,
    GatedDeltaNet,
    Hedgehog,
    NaNPastHundred,
)

from attnexp.mixers.conformance import Size, run_checks
from attnexp.mixers.request import MixerRequest

LANGUAGE_MODEL = MixerRequest(dim=16, num_tokens=8, causal=True, heads=2)  # data=corpus: 8 tokens, causal


def found(factory, size: Size | None = None) -> dict:
    return {r.name: r for r in run_checks(factory, size=size)}


@pytest.mark.parametrize("cls", [Based, Hedgehog, ChunkedSSD, GatedDeltaNet])
def test_the_four_families_pass_at_the_kits_size_and_a_language_models(cls):
    for size in (None, Size.of(LANGUAGE_MODEL)):
        failed = [f"{r.name}: {r.measured}" for r in found(partial(cls), size).values() if r.ok is False]
        assert not failed, failed


def test_a_language_models_mixer_is_checked_past_any_chunk_or_window_it_may_have():
    """Finding: the size docs recommend (data=corpus, 8 tokens) sat inside one 16-token chunk."""
    assert Size.of(LANGUAGE_MODEL).queries >= 64
    assert Size.of(MixerRequest(dim=16, num_tokens=300, causal=True)).queries == 300  # the run's own when longer
    assert Size.of(MixerRequest(dim=16, num_tokens=16)).queries == 16  # an image network's tokens: its own


def test_a_chunk_that_reads_the_next_chunk_fails_at_a_language_models_size_never_named_at_a_pad_or_reshape():
    """Findings: the size docs recommend (data=corpus, 8 tokens) sat inside one 16-token chunk, so the leak passed;
    and the leak of a chunked mixer was named at its F.pad and reshape line, which only carry the tokens."""
    leak = found(partial(ChunkedSSDReadsAhead), Size.of(LANGUAGE_MODEL))["no causal leak"]
    assert leak.ok is False, leak.measured
    assert line_of(ChunkedSSD, "F.pad(t.float()") not in leak.measured, leak.measured
    brings = line_of(ChunkedSSDReadsAhead, "ahead[:, :, 1:]")
    assert f"at {brings}" in leak.measured or "the line cannot be told" in leak.measured, leak.measured


def test_a_mixer_that_mixes_the_batch_in_training_only_fails_batch_independence_at_its_line():
    """Finding: batch independence was checked in eval mode only, so a mixer that subtracts the batch mean while
    training passed every check (and a sweep then called it worse than dot)."""
    batch = found(partial(BatchCentred))["batch independence"]
    assert batch.ok is False and "training mode" in batch.measured, batch.measured
    assert f"at {line_of(BatchCentred, 'z - z.mean(0')}" in batch.measured, batch.measured
    assert found(partial(Hedgehog))["batch independence"].ok  # the correct one, in both modes


def test_a_nan_fails_only_the_checks_that_measure_finiteness_and_is_named_at_its_line():
    """Finding: a mixer that makes NaN past 100 tokens, checked at 128, failed token layout, batch independence, no
    causal leak and same seed, as though it leaked and were not deterministic."""
    results = found(partial(NaNPastHundred), Size(2, 128, 131, 8))
    failed = {name for name, r in results.items() if r.ok is False}
    assert failed == {"fully masked rows", "weights as declared", "gradients", "finite in bf16"}, {
        name: r.measured for name, r in results.items() if r.ok is False
    }
    made = line_of(NaNPastHundred, "torch.sqrt(99.5")
    for name in ("batch independence", "no causal leak", "key padding invisible", "same seed, same output"):
        assert results[name].measured.startswith(f"not measurable: NaN first made at {made}"), results[name].measured


def test_weights_on_a_masked_pair_are_named_where_the_mask_put_them_not_at_the_cast_that_returns_them():
    """Finding: the weights check named the weights.to(v.dtype) cast in a return, not the mask that put the weight
    there."""
    from broken_mixers import WindowLetsTheNextKeyIn

    weights = found(partial(WindowLetsTheNextKeyIn), Size(causal=True))["weights as declared"]
    assert weights.ok is False and "on a masked pair" in weights.measured, weights.measured
    assert f"computed at {line_of(WindowLetsTheNextKeyIn, '.softmax(-1)')}" in weights.measured, weights.measured
