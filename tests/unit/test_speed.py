"""The kit's speed line: a mixer's forward and backward time and memory beside dot's at one size, for every mixer."""

from __future__ import annotations

import math

import pytest
from helpers import model_factory, options

from attnexp.mixers import build_mixer
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
