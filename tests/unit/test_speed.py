"""The kit's speed line: a mixer's forward and backward time and memory beside dot's at one size, for every mixer."""

from __future__ import annotations

import math
import time
from functools import partial

import pytest
from helpers import model_factory, options

from attnexp.mixers import DotAttention, build_mixer
from attnexp.mixers.conformance.speed import compare_with_dot, machine


@pytest.mark.parametrize("name", options("model"))
def test_the_speed_line_runs_for_every_built_in_mixer(name):
    request = build_mixer(model_factory(name), dim=8, num_tokens=6, heads=2).request
    speed = compare_with_dot(model_factory(name), request, batch=2, rounds=2)
    assert speed.mixer.seconds > 0 and speed.dot.seconds > 0 and speed.dot.memory > 0 and speed.mixer.memory >= 0
    ratio = float(speed.describe().split("x dot's time")[0])
    assert math.isfinite(ratio) and ratio > 0 and "medians of 2 alternating rounds" in speed.describe()
    assert "memory saved for backward" in speed.describe()  # what a CPU can count


def test_dot_against_itself_saves_the_same_memory_and_the_machine_is_named():
    request = build_mixer(model_factory("dot"), dim=16, num_tokens=8, heads=2).request
    speed = compare_with_dot(model_factory("dot"), request, batch=4, rounds=2)
    assert speed.mixer.memory == speed.dot.memory > 0
    named = machine()
    assert named.startswith("CPU ") and "torch " in named and "thread" in named


def test_the_memory_docs_mixers_md_quotes_is_what_the_kit_measures():
    """docs/mixers.md's example of the speed line (``attnexp-check model=euclid data=mnist net.dim=64 model.heads=4``:
    batch 64, 16 tokens, width 64, 4 heads) quotes the memory saved for backward, which depends on the code, not the
    machine: the figures it gives are the ones the kit measures now (its 1.52x was 1.74x at one time)."""
    import re

    import torch
    from helpers import REPO

    from attnexp.mixers.conformance.speed import megabytes, memory

    quoted = re.search(
        r"x dot's memory saved for backward \(([\d.]+ \w+) against ([\d.]+ \w+)\)",
        (REPO / "docs" / "mixers.md").read_text(),
    )
    assert quoted, "docs/mixers.md quotes no speed line"
    torch.manual_seed(0)
    x = torch.randn(64, 16, 64)
    measured = []
    for name in ("euclid", "dot"):
        mixer = build_mixer(model_factory(name, heads=4), dim=64, num_tokens=16).train()
        measured.append(megabytes(memory(mixer, x)))
    assert [quoted[1], quoted[2]] == measured


class Sleepy(DotAttention):
    """A slow mixer: a quarter of a second a forward pass in training (a Python loop's or a recurrence's cost)."""

    def forward(self, *args, **kwargs):
        if self.training:
            time.sleep(0.25)
        return super().forward(*args, **kwargs)


def test_a_slow_mixer_gets_a_coarse_ratio_within_the_time_cap():
    """The warm-up (no calibration step after one that slow) and one round take at least 0.5 s of the mixer's sleep: a
    second round would end past the 0.6 s cap, so none starts (sleep never returns early: the count does not depend on
    how busy the machine is)."""
    request = build_mixer(model_factory("dot"), dim=8, num_tokens=6).request
    speed = compare_with_dot(partial(Sleepy), request, batch=2, cap_s=0.6)
    assert speed.rounds == 1 and speed.ended == "capped"
    assert "a coarse ratio: 1 alternating round, all that fit in 0.6 s" in speed.describe(), speed.describe()
    assert speed.mixer.seconds >= 0.25 > speed.dot.seconds


@pytest.mark.parametrize(
    "mixer_s,dot_s,rounds,ended",
    [
        ((2.0,), (1.0,), 6, "decided"),  # the same ratio every round: decided at the first rounds that give an interval
        ((3.0, 1.0), (1.0, 1.0), 15, "all"),  # a ratio of 3 or 1 by turns: never decided, every round measured
    ],
)
def test_rounds_stop_once_the_ratio_is_decided(monkeypatch, mixer_s, dot_s, rounds, ended):
    """Each measure's seconds given (no clock read decides the count): the rounds stop at the first count where the
    median ratio's 95% interval lies within 5% of it."""
    from attnexp.mixers.conformance import speed as module

    given = {"mixer": iter(mixer_s * 20), "dot": iter(dot_s * 20)}
    monkeypatch.setattr(module, "measure", lambda m, x, n: next(given["dot" if type(m) is DotAttention else "mixer"]))
    request = build_mixer(model_factory("dot"), dim=8, num_tokens=6).request
    speed = compare_with_dot(partial(Sleepy), request, batch=2, cap_s=math.inf)
    assert (speed.rounds, speed.ended) == (rounds, ended)
    assert ("the ratio decided within ±5%" in speed.describe()) == (ended == "decided"), speed.describe()
