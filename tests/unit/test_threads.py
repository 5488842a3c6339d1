"""Torch's threads by default: one for a step too small to share, more where its forward pass pays for them, the
user's ``threads=N`` always; counting the step leaves no trace in the run."""

from __future__ import annotations

from functools import partial

import pytest
import pytorch_lightning as pl
import torch
from helpers import quiet_trainer

from attnexp.data import DigitsDataModule
from attnexp.mixers import DotAttention
from attnexp.networks import PatchClassifier
from attnexp.tasks import ImageClassification
from attnexp.training import threads
from attnexp.training.module import TaskModule


@pytest.fixture(autouse=True)
def one_thread_after():
    yield
    torch.set_num_threads(1)  # the test process's own count (tests/conftest.py)


class ThreadsSeen(pl.Callback):
    """The thread count the training batches ran with."""

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.seen = torch.get_num_threads()


def fit(rule: threads.ThreadRule, dropout: float = 0.0, **net_options) -> tuple[TaskModule, int]:
    """Two training batches of a tiny model on the digits with ``rule``; the module and the threads it trained with."""
    pl.seed_everything(0, verbose=False)
    data = DigitsDataModule(patch_size=2, batch_size=16, val_size=100)
    net = PatchClassifier(
        partial(DotAttention, heads=1),
        image_size=8,
        channels=1,
        patch_size=2,
        num_classes=10,
        dropout=dropout,
        **net_options,
    )
    module = TaskModule(net, ImageClassification(), optimizer=partial(torch.optim.SGD, lr=0.1))
    seen = ThreadsSeen()
    trainer = quiet_trainer(
        max_steps=2,
        limit_val_batches=0,
        callbacks=[rule, seen],
    )
    trainer.fit(module, datamodule=data)
    return module, seen.seen


def test_one_thread_per_share_of_the_work_at_most_the_cores():
    per = threads.FLOPS_PER_THREAD
    assert threads.threads_for(0, 8) == 1 and threads.threads_for(per * 0.99, 8) == 1
    assert threads.threads_for(per * 2.5, 8) == 2 and threads.threads_for(per * 100, 8) == 8
    assert threads.threads_for(per * 100, 1) == 1


def test_a_small_step_trains_on_one_thread_where_torch_would_use_more(monkeypatch):
    monkeypatch.setattr(threads, "MOST", 4)
    assert fit(threads.ThreadRule())[1] == 1


def test_a_large_step_trains_on_more_threads(monkeypatch):
    monkeypatch.setattr(threads, "MOST", 3)
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", 1.0)  # every step is large
    assert fit(threads.ThreadRule())[1] == 3


def test_a_parallel_sweep_job_trains_on_its_share_at_most(monkeypatch):
    monkeypatch.setattr(threads, "MOST", 8)
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", 1.0)
    assert fit(threads.ThreadRule(share=2))[1] == 2
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", float("inf"))
    assert fit(threads.ThreadRule(share=4))[1] == 1  # a share is a cap: a small step still trains on one thread


def test_the_threads_asked_for_win(monkeypatch):
    monkeypatch.setattr(threads, "MOST", 4)
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", 1.0)
    assert fit(threads.ThreadRule(2))[1] == 2


def test_counting_the_step_changes_nothing_the_run_computes(monkeypatch):
    """The rule's probe (a forward pass of the first batch, with dropout drawing random numbers) leaves the weights,
    the random state and the batches as they were: the same run with the count asked for ends bit for bit the same."""
    monkeypatch.setattr(threads, "MOST", 2)
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", float("inf"))  # probed, then one thread
    counted, _ = fit(threads.ThreadRule(), dropout=0.5)
    state = torch.get_rng_state()
    asked, _ = fit(threads.ThreadRule(1), dropout=0.5)
    for (name, a), b in zip(counted.state_dict().items(), asked.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert torch.equal(state, torch.get_rng_state())


def test_a_learned_position_table_is_counted(monkeypatch):
    """The README's everyday command (``net.positions=learned``): torch's module tracker fails on a parameter's view
    made without gradients, so the count runs with them."""
    monkeypatch.setattr(threads, "MOST", 3)
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", 1.0)
    assert fit(threads.ThreadRule(), positions="learned", dim=8, depth=2, prenorm=True)[1] == 3


def test_a_step_that_cannot_be_counted_trains_on_the_default_threads_and_says_why(monkeypatch, caplog):
    def fails(pl_module, batch):
        raise RuntimeError("a network of one's own")

    monkeypatch.setattr(threads, "MOST", 3)
    monkeypatch.setattr(threads, "forward_flops", fails)
    with caplog.at_level("WARNING", logger="attnexp"):
        assert fit(threads.ThreadRule())[1] == 3
    assert "Could not count the work of a training step" in caplog.text and "a network of one's own" in caplog.text
