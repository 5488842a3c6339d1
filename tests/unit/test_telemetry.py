"""Attention health statistics on weights whose answers are known, and the callback on a real module."""

from __future__ import annotations

import math

import pytest
import torch

from attnexp.callbacks.telemetry import attention_stats, gate_stats


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
    real = torch.tensor([[True, True, True, True], [True, True, False, False]])  # the second sequence: 2 tokens, 2 of padding
    mask = real[:, None, None, :]  # (B, 1, 1, L): a key padding mask
    w = (real[:, None, None, :].float() / real.sum(-1)[:, None, None, None]).expand(2, 1, 4, 4)  # uniform over the real keys
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
    """Sigmoid weights (each on its own): an entropy of them would mean nothing, the share of weight a row gives does."""
    w = torch.full((2, 1, 4, 4), 0.5)  # every key half: rows of mass 2
    stats = attention_stats(w, None, causal=False, distributions=False)
    assert stats["mass"] == pytest.approx(2.0) and stats["max_weight"] == pytest.approx(0.5)
    assert "entropy" not in stats and "peaked" not in stats and stats["self_weight"] == pytest.approx(0.5)
