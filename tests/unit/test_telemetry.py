"""Attention health statistics on weights whose answers are known, and the callback on a real module."""

from __future__ import annotations

import math

import pytest
import torch

from attnexp.mixers import NON_NEGATIVE, SIGNED
from attnexp.training.health import attention_stats, gate_stats


def test_uniform_attention_has_full_entropy_and_no_peaks():
    w = torch.full((2, 3, 4, 4), 0.25)
    stats = attention_stats(w, torch.zeros(2, 3, 4, 4), causal=False)
    assert stats["entropy"] == pytest.approx(1.0) and stats["max_weight"] == pytest.approx(0.25)
    assert stats["peaked"] == 0.0 and stats["self_weight"] == pytest.approx(0.25)
    assert stats["score_min"] == stats["score_max"] == 0.0 and stats["nonfinite"] == 0.0


def test_one_hot_on_self_is_peaked_with_zero_entropy():
    w = torch.eye(5).expand(2, 1, 5, 5)
    scores = torch.where(torch.eye(5, dtype=torch.bool), 1e9, 1.0).expand(2, 1, 5, 5).clone()
    scores[0, 0, 1, 2] = float("nan")
    stats = attention_stats(w, scores, causal=False)
    assert stats["entropy"] == pytest.approx(0.0, abs=1e-6) and stats["peaked"] == 1.0 and stats["self_weight"] == 1.0
    assert stats["score_max"] == 1e9 and stats["score_min"] == 1.0 and stats["nonfinite"] == 1.0


def test_causal_rows_are_normalised_by_the_keys_they_may_see():
    w = torch.tril(torch.ones(4, 4))
    w = (w / w.sum(-1, keepdim=True)).expand(1, 1, 4, 4)  # uniform over the allowed prefix
    scores = torch.zeros(1, 1, 4, 4)
    scores[..., 0, 3] = float("inf")  # a future position: not counted
    stats = attention_stats(w, scores, causal=True)
    assert stats["entropy"] == pytest.approx(1.0) and stats["nonfinite"] == 0.0
    assert stats["self_weight"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)  # the first row (one key) left out
    assert stats["peaked"] == 0.0 and stats["max_weight"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)


def test_padded_keys_and_padded_tokens_are_left_out():
    real = torch.tensor(
        [[True, True, True, True], [True, True, False, False]]
    )  # the second sequence: 2 tokens, 2 of padding
    mask = real[:, None, None, :]  # (B, 1, 1, L): a key padding mask
    w = (real[:, None, None, :].float() / real.sum(-1)[:, None, None, None]).expand(
        2, 1, 4, 4
    )  # uniform over the real keys
    scores = torch.zeros(2, 1, 4, 4)
    scores[1, 0, :, 3] = float("nan")  # scores of padded keys do not count
    stats = attention_stats(w, scores, causal=False, mask=mask)
    assert stats["entropy"] == pytest.approx(1.0) and stats["nonfinite"] == 0.0  # each row over log(its real keys)
    assert stats["self_weight"] == pytest.approx((4 * 0.25 + 2 * 0.5) / 6)  # the padded tokens' own rows left out
    cross = attention_stats(w[:, :, :3], scores[:, :, :3], causal=False, mask=mask, self_attention=False)
    assert "self_weight" not in cross and cross["max_weight"] == pytest.approx((3 * 0.25 + 3 * 0.5) / 6)


def test_gate_spread_is_zero_for_a_dead_gate():
    assert gate_stats(torch.full((8, 6), 0.6))["gate_std"] == 0.0
    assert gate_stats(torch.rand(8, 6))["gate_std"] > 0.05
    assert math.isnan(gate_stats(torch.rand(1, 6))["gate_std"])


def test_weights_that_are_not_distributions_get_their_mass_and_no_entropy():
    """Sigmoid weights (each on its own): an entropy of them would mean nothing, the share of weight a row gives
    does."""
    w = torch.full((2, 1, 4, 4), 0.5)  # every key half: rows of mass 2
    stats = attention_stats(w, None, causal=False, kind=NON_NEGATIVE)
    assert stats["mass"] == pytest.approx(2.0) and stats["max_weight"] == pytest.approx(0.5)
    assert "entropy" not in stats and "peaked" not in stats and stats["self_weight"] == pytest.approx(0.5)


def test_signed_weights_get_their_negative_mass():
    """A difference of maps: rows of mass 1 - lambda with negative weights; entropy would mean nothing."""
    w = torch.tensor([[0.6, -0.1, -0.1, 0.0], [0.2, 0.2, -0.2, 0.0]]).expand(1, 1, 2, 4)
    stats = attention_stats(w, None, causal=False, self_attention=False, kind=SIGNED)
    assert stats["mass"] == pytest.approx(0.3) and stats["negative_mass"] == pytest.approx(0.2)
    assert stats["min_weight"] == pytest.approx(-0.15) and stats["max_weight"] == pytest.approx(0.4)
    assert "entropy" not in stats and "peaked" not in stats


def module_for(mixer_factory, x):
    """A stand-in for the training module and trainer, with what the telemetry callback reads of them."""
    from types import SimpleNamespace

    from pytorch_lightning.plugins.precision import Precision

    from attnexp.networks import PatchClassifier
    from attnexp.tasks import ImageClassification

    logged = {}
    net = PatchClassifier(mixer_factory, image_size=8, channels=1, patch_size=2, num_classes=10, dim=8)
    module = SimpleNamespace(
        net=net,
        device=torch.device("cpu"),
        task=ImageClassification(),
        log_dict=lambda v, **_: logged.update(v),
        trainer=SimpleNamespace(precision_plugin=Precision()),
    )
    trainer = SimpleNamespace(sanity_checking=False, datamodule=SimpleNamespace(val_dataloader=lambda: [(x, None)]))
    return module, trainer, logged


def test_the_telemetry_gets_weights_and_scores_through_the_contract_only(caplog):
    """An attend-only mixer (no score) is measured from forward(..., need_weights=True); scores come through the
    documented hook where a mixer offers it; a mixer with no weights gets one line and no telemetry."""
    import logging
    from functools import partial

    from broken_mixers import AttendOnly, NoWeights

    from attnexp.mixers import DotAttention
    from attnexp.training.callbacks.telemetry import AttentionTelemetry

    x = torch.randn(4, 16, 4)
    module, trainer, logged = module_for(partial(AttendOnly), x)
    AttentionTelemetry().on_validation_epoch_end(trainer, module)
    assert {"attn/layer0/entropy", "attn/layer0/max_weight"} <= logged.keys(), logged
    assert "attn/layer0/score_max" not in logged  # its own attend offers no scores
    module, trainer, logged = module_for(partial(DotAttention), x)
    AttentionTelemetry().on_validation_epoch_end(trainer, module)
    assert {"attn/layer0/entropy", "attn/layer0/score_max", "attn/layer0/nonfinite"} <= logged.keys(), logged
    module, trainer, logged = module_for(partial(NoWeights), x)
    with caplog.at_level(logging.INFO, logger="attnexp.weights"):
        AttentionTelemetry().on_validation_epoch_end(trainer, module)
        AttentionTelemetry().on_validation_epoch_end(trainer, module)
    assert not logged
    assert [r.getMessage() for r in caplog.records] == [
        "NoWeights returns no attention weights (forward(..., need_weights=True) gave None): no attention telemetry "
        "and no attention figures for this run."
    ]


def test_a_mixer_without_scores_keeps_its_nan_count_and_the_record_says_what_was_not_measured():
    """Finding: mixers with their own attend silently lost the NaN and score telemetry. The weights' NaN count is
    every mixer's; the score range of a mixer that offers no scores is named in the run's record as unmeasured."""
    from functools import partial
    from types import SimpleNamespace

    from broken_mixers import AttendOnly

    from attnexp.mixers import DotAttention
    from attnexp.training.callbacks.telemetry import AttentionTelemetry

    record = SimpleNamespace(fields={})
    module, trainer, logged = module_for(partial(AttendOnly), torch.randn(4, 16, 4))
    AttentionTelemetry(record=record).on_validation_epoch_end(trainer, module)
    assert logged["attn/layer0/nonfinite_weights"] == 0.0 and "attn/layer0/score_max" not in logged
    assert record.fields["telemetry_unmeasured"] == [
        "AttendOnly: score_min, score_max and nonfinite (its scores; its attend does not pass them through "
        "self.hook_scores)"
    ]
    record = SimpleNamespace(fields={})
    module, trainer, logged = module_for(partial(DotAttention), torch.randn(4, 16, 4))
    AttentionTelemetry(record=record).on_validation_epoch_end(trainer, module)
    assert "attn/layer0/score_max" in logged and "telemetry_unmeasured" not in record.fields
    weights = torch.full((1, 1, 3, 3), 1 / 3).index_fill(-1, torch.tensor([0]), float("nan"))
    assert attention_stats(weights, None, causal=True)["nonfinite_weights"] == 3.0  # allowed pairs only


def test_a_run_holds_the_weights_of_its_first_batch_to_the_declared_kind():
    """Finding: the declared kind was never checked in a run; a mixer whose weights are signed but say otherwise
    (the older flag, distributions = False) trained with telemetry that measured them as non-negative."""
    from functools import partial
    from types import SimpleNamespace

    from broken_mixers import OldFlagSigned

    from attnexp.errors import MixerError
    from attnexp.mixers import DotAttention
    from attnexp.training.callbacks.telemetry import AttentionTelemetry

    x = torch.randn(4, 16, 4)
    batch, trainer = (x, torch.zeros(4)), SimpleNamespace(precision="32-true")
    module, _, _ = module_for(partial(DotAttention), x)
    AttentionTelemetry().on_train_batch_start(trainer, module, batch, 0)
    module, _, _ = module_for(partial(OldFlagSigned), x)
    callback = AttentionTelemetry()
    with pytest.raises(MixerError) as raised:
        callback.on_train_batch_start(trainer, module, batch, 0)
    message = str(raised.value)
    assert message.startswith("OldFlagSigned (") and "broken_mixers.py:" in message, message
    assert "says its weights are 'non-negative' (weight_kind), but on the first training batch they hold" in message
    assert 'negative weights (weights that may be negative say weight_kind = "signed")' in message
    callback.on_train_batch_start(trainer, module, batch, 1)  # the first batch only


def test_nan_weights_on_the_first_batch_are_named_as_a_nan_not_as_a_kind_to_declare():
    """Finding: a NaN was framed as a weight-kind breach ("declare the kind they are ... or fix the weights"), where
    declaring a kind cannot fix a NaN."""
    from functools import partial
    from types import SimpleNamespace

    from broken_mixers import NaNWeights
    from helpers import line_of

    from attnexp.errors import MixerError
    from attnexp.training.callbacks.telemetry import AttentionTelemetry

    x = torch.randn(4, 16, 4)
    module, _, _ = module_for(partial(NaNWeights), x)
    with pytest.raises(MixerError) as raised:
        AttentionTelemetry().on_train_batch_start(SimpleNamespace(precision="32-true"), module, (x, torch.zeros(4)), 0)
    message = " ".join(str(raised.value).split())
    assert "made NaN or infinite weights" in message and "declare the kind" not in message, message
    assert f"first made at {line_of(NaNWeights, 'index_fill')}" in message, message
