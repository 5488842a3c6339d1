"""The kit's token layout check: a mixer that reads token order but inherits ``permutation_equivariant = True`` is told
which declaration to change."""

from __future__ import annotations

from functools import partial

import torch

from attnexp.mixers import MultiHeadAttention
from attnexp.mixers.conformance import run_checks


class NearAttention(MultiHeadAttention):
    """Softmax attention with a penalty for distance (as ALiBi's): positions inside, and no word of it."""

    def score(self, q, k):
        i, j = torch.arange(q.shape[-2])[:, None], torch.arange(k.shape[-2])
        return q @ k.transpose(-2, -1) * self.head_dim**-0.5 - (i - j).abs()


class DeclaredNearAttention(NearAttention):
    permutation_equivariant = False


def test_a_mixer_with_positions_inside_that_inherits_equivariance_is_told_to_set_it_false():
    found = {r.name: r for r in run_checks(partial(NearAttention))}
    layout = found["token layout"]
    assert layout.ok is False and (
        "NearAttention inherits from MultiHeadAttention permutation_equivariant = True" in layout.measured
    ), layout.measured
    assert "sets permutation_equivariant = False" in layout.measured
    declared = {r.name: r for r in run_checks(partial(DeclaredNearAttention))}
    assert declared["token layout"].ok is None and "does not declare permutation_equivariant" in (
        declared["token layout"].measured
    )
    assert [r.name for r in declared.values() if r.ok is False] == []  # the declaration is all it lacked
