"""Torch's threads by default: one for a step too small to share, more where its forward pass pays for them, never
more than the cores free when training starts, the user's ``threads=N`` always; counting the step leaves no trace in
the run."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

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

real_core_times = threads.core_times


@pytest.fixture(autouse=True)
def one_thread_after():
    yield
    torch.set_num_threads(1)  # the test process's own count (tests/conftest.py)


class ThreadsSeen(pl.Callback):
    """The thread count the training batches ran with."""

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.seen = torch.get_num_threads()


@pytest.fixture(autouse=True)
def quiet_machine(monkeypatch):
    """Every core idle while the rule looks (the test machine's own load left out), and no time spent looking."""
    monkeypatch.setattr(threads, "LOOK", 0.0)
    machine_with_busy_cores(monkeypatch, 0)


def machine_with_busy_cores(monkeypatch, busy: int, cores: int = 4) -> None:
    """/proc/stat as it reads on a machine of ``cores`` cores (all this process's) all idle but ``busy`` of them."""
    mine = range(cores)
    monkeypatch.setattr(threads, "usable_cores", lambda: set(mine))
    reads = iter(range(1, 1000))

    def core_times():
        n = next(reads) * 100  # ticks so far: each look 100 more a core, all idle but on the busy cores
        return {core: (0 if i < busy else n, n) for i, core in enumerate(mine)}

    monkeypatch.setattr(threads, "core_times", core_times)


def fit(
    rule: threads.ThreadRule, dropout: float = 0.0, deterministic: bool = False, **net_options
) -> tuple[TaskModule, int]:
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
    trainer = quiet_trainer(max_steps=2, limit_val_batches=0, callbacks=[rule, seen], deterministic=deterministic)
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


def test_busy_cores_are_left_to_whoever_uses_them(monkeypatch):
    """Beside busy processes a step's threads would wait for a core they share at every parallel operation: the rule
    takes the cores that were idle while it looked, and says so."""
    monkeypatch.setattr(threads, "MOST", 3)
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", 1.0)
    machine_with_busy_cores(monkeypatch, 3)  # one of four free
    rule = threads.ThreadRule()
    assert fit(rule)[1] == 1
    assert "1, not 3: 1 of them free when training started" in rule.why
    machine_with_busy_cores(monkeypatch, 2)
    assert fit(threads.ThreadRule())[1] == 2


def test_a_quiet_machine_gives_the_step_its_threads_and_the_reason(monkeypatch):
    monkeypatch.setattr(threads, "MOST", 3)
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", 1.0)
    rule = threads.ThreadRule()
    assert fit(rule)[1] == 3
    assert "GFLOP a training step's forward pass" in rule.why and rule.why.endswith("at most 3 cores: 3 threads")


def test_deterministic_runs_do_not_depend_on_what_else_runs(monkeypatch):
    """``trainer.deterministic=true``: the same command gives the same numbers, so the load is not looked at."""
    monkeypatch.setattr(threads, "MOST", 3)
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", 1.0)
    machine_with_busy_cores(monkeypatch, 4)  # every core busy
    rule = threads.ThreadRule()
    assert fit(rule, deterministic=True)[1] == 3
    assert "deterministic" in rule.why


def test_a_machine_that_does_not_say_gives_the_counted_threads(monkeypatch):
    monkeypatch.setattr(threads, "MOST", 3)
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", 1.0)
    monkeypatch.setattr(threads, "STAT", threads.STAT.with_name("no such file"))
    monkeypatch.setattr(threads, "core_times", real_core_times)
    assert threads.free_cores() is None
    assert fit(threads.ThreadRule())[1] == 3


def test_the_cores_are_read_from_linux_counters(tmp_path, monkeypatch):
    """A /proc/stat of two cores, one busy over the look: one free core."""
    stat = tmp_path / "stat"
    looks = iter(
        [
            "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0 0 0\nintr 1\n",
            "cpu  30 0 10 110 0 0 0 0 0 0\ncpu0 5 0 5 60 0 0 0 0 0 0\ncpu1 25 0 5 50 0 0 0 0 0 0\nintr 1\n",
        ]
    )
    monkeypatch.setattr(threads, "STAT", stat)
    monkeypatch.setattr(threads, "core_times", real_core_times)
    monkeypatch.setattr(threads, "usable_cores", lambda: {0, 1})
    real_sleep = threads.time.sleep
    stat.write_text(next(looks))
    monkeypatch.setattr(threads.time, "sleep", lambda s: (stat.write_text(next(looks)), real_sleep(0)))
    assert threads.free_cores() == 1


def test_data_parallel_processes_on_one_machine_share_its_cores(monkeypatch):
    """Two training processes on the CPU (``trainer.devices=2``): each takes at most half of the cores, whatever the
    look at the cores saw (the other process may be sleeping while it looks)."""
    monkeypatch.setattr(threads, "MOST", 4)
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", 1.0)
    data = DigitsDataModule(patch_size=2, batch_size=16, val_size=100)
    data.setup("fit")
    net = PatchClassifier(partial(DotAttention, heads=1), image_size=8, channels=1, patch_size=2, num_classes=10)
    module = TaskModule(net, ImageClassification(), optimizer=partial(torch.optim.SGD, lr=0.1))
    trainer = SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device("cpu")), num_devices=2, datamodule=data)
    rule = threads.ThreadRule()
    rule.on_fit_start(trainer, module)
    assert torch.get_num_threads() == 2, rule.why
    assert "at most 2 cores (this process's share): 2 threads" in rule.why


def test_a_process_started_beside_the_run_gets_its_core_back(monkeypatch):
    """The cores are looked at again as training goes (every ``RELOOK`` seconds, here every batch): a core that has
    become busy is left to its process, and the record says from which step."""
    monkeypatch.setattr(threads, "MOST", 3)
    monkeypatch.setattr(threads, "FLOPS_PER_THREAD", 1.0)
    monkeypatch.setattr(threads, "RELOOK", 0.0)
    looks = iter([0, 0, 3, 3, 3, 3, 0, 0, 3, 3])  # busy cores at each read of /proc/stat, two reads a look: quiet,
    # then three busy (the fit's two batches), then quiet, then busy again
    ticks = iter(range(1, 1000))

    def core_times():
        n, busy = next(ticks) * 100, next(looks, 3)
        return {core: (0 if core < busy else n, n) for core in range(4)}

    monkeypatch.setattr(threads, "usable_cores", lambda: set(range(4)))
    monkeypatch.setattr(threads, "core_times", core_times)
    rule = threads.ThreadRule()
    assert fit(rule)[1] == 1
    assert rule.why.endswith("at most 3 cores: 3 threads; 1 from step 0 (1 core free)"), rule.why
    seen = ThreadsSeen()
    rule.on_train_batch_start(SimpleNamespace(global_step=2), None, None, 2)  # the core is free again
    seen.on_train_batch_start(None, None, None, 2)
    assert seen.seen == 3 and rule.why.endswith("3 threads; 3 from step 2 (4 cores free) after 1 earlier changes")
    rule.on_train_batch_start(SimpleNamespace(global_step=3), None, None, 3)
    assert rule.why.endswith("3 threads; 1 from step 3 (1 core free) after 2 earlier changes"), rule.why
    assert rule.why.count(";") == 1  # the first choice and the last change, however long the run
