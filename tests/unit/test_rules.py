"""Rules no other test reaches: a switch is a boolean (not 1, not "true"), a count no boolean; the earliest of equally
good epochs is the best; the keys that cannot change a number never include one that can."""

from __future__ import annotations

import pytest

from attnexp.errors import AttnexpError
from attnexp.rules import Rule, check_value
from attnexp.runs.resolution import judge
from attnexp.runs.settings import NOT_METHOD, method

SWITCH = Rule(bool, lambda v: True, "true or false", "true")
COUNT = Rule(int, lambda v: v > 0, "a positive integer", "4")


@pytest.mark.parametrize("value", [1, 0, "true", 1.0])
def test_a_switch_takes_a_boolean_only(value):
    with pytest.raises(AttnexpError, match="must be true or false"):
        check_value("model.bias", value, SWITCH)
    check_value("model.bias", True, SWITCH)


def test_a_count_takes_no_boolean():
    with pytest.raises(AttnexpError, match="must be a positive integer"):
        check_value("trainer.accumulate_grad_batches", True, COUNT)
    check_value("trainer.accumulate_grad_batches", 4, COUNT)


@pytest.mark.parametrize("mode,values", [("max", [0.5, 0.8, 0.8, 0.7]), ("min", [2.0, 1.0, 1.0, 1.5])])
def test_the_earliest_of_equally_good_epochs_is_the_best(mode, values):
    history = [[epoch, value] for epoch, value in enumerate(values, 1)]
    assert judge(history, "val/acc" if mode == "max" else "val/loss", mode, None)["best_epoch"] == 2


# Keys that change what a run computes: none may count as neutral (left out of a run's identity)
CHANGE_NUMBERS = [
    "trainer.gradient_clip_val",
    "trainer.gradient_clip_algorithm",
    "trainer.accumulate_grad_batches",
    "trainer.max_epochs",
    "trainer.max_steps",
    "trainer.precision",
    "trainer.limit_train_batches",
    "module.optimizer.lr",
    "module.scheduler",
    "data.batch_size",
    "data.split_seed",
    "model.heads",
    "net.dim",
    "task.monitor",
]


@pytest.mark.parametrize("key", CHANGE_NUMBERS)
def test_a_key_that_changes_numbers_is_never_neutral(key):
    assert not any(key == n or key.startswith(f"{n}.") for n in NOT_METHOD), key
    node: dict = {}
    leaf = node
    *parents, last = key.split(".")
    for part in parents:
        leaf = leaf.setdefault(part, {})
    leaf[last] = 1
    kept = method(node)
    for part in key.split("."):
        kept = kept[part]
    assert kept in (1, "1")  # kept (a precision spelt as a string)
