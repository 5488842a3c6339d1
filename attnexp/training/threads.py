"""How many torch threads a run trains with on a CPU: one where a training step is too small to share between cores,
more only where its matrices pay for them, and never more than the cores that are free when training starts.

A second OpenMP thread costs a fork and a join, and a waiting core, in every parallel operation of the step; on a
small model that costs more than it saves. The work of a step is counted, not guessed: the floating-point operations
of one training batch's forward pass, by torch's own ``FlopCounterMode``, on the real model and batch before training
starts (no weight, random state or batch changes). The count runs with gradients on, as training does: torch's module
tracker, which the counter uses, fails on a parameter's view made without them (a learned position table). Should
counting fail anyway (a network of one's own), the run trains on every free core and train.log says why.

OpenMP's threads wait for work by spinning a while (its default): the cores a step gets pay on a quiet machine, but a
thread that shares its core with a busy process is preempted for whole time slices, and every parallel operation waits
for it (two threads took 2-5x a single one's step beside a busy loop). So the cores that are busy when training
starts (Linux's per-core counters, looked at for a tenth of a second), and every 30 seconds of training after, are
left to whoever uses them.
``trainer.deterministic=true`` does not look: its numbers must not depend on what else runs. metrics.json records the
threads (``device.threads``) and why (``device.threads_why``).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.flop_counter import FlopCounterMode

# Forward FLOPs of one training step that pay for each thread (docs/speed.md#threads): two threads paid from
# experiment=vit_mnist (0.62 GFLOP) up, not on the MNIST model (0.02 GFLOP) nor experiment=mnist_mlp (0.08).
FLOPS_PER_THREAD = 1.0e8
MOST = torch.get_num_threads()  # torch's default when this module is first imported: OMP_NUM_THREADS, else the cores
LOOK = 0.1  # seconds the cores are watched at the start of training
RELOOK = 30.0  # seconds of training between two looks (a tenth of a second asleep each: 0.3% of the time)
FREE = 0.5  # a core is free when it was idle for at least this share of the look
STAT = Path("/proc/stat")
log = logging.getLogger("attnexp")


def core_times() -> dict[int, tuple[int, int]]:
    """Each core's (idle, total) time so far, in clock ticks (Linux's /proc/stat; waiting for a disk counts as idle,
    time a hypervisor gave away as busy); empty where there is no such file."""
    try:
        lines = STAT.read_text().splitlines()
    except OSError:
        return {}
    times = {}
    for line in lines:
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            ticks = [int(v) for v in values[:8]]
            times[int(name[3:])] = (ticks[3] + ticks[4], sum(ticks))
    return times


def usable_cores() -> set[int]:
    """The cores this process may run on (empty where the system does not say)."""
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()


def free_cores(look: float = LOOK) -> int | None:
    """The cores this process may use that were idle for at least :data:`FREE` of ``look`` seconds while it slept, or
    None where the machine does not say (no /proc/stat)."""
    mine = usable_cores()
    before = core_times()
    if not before or not mine:
        return None
    time.sleep(look)
    after = core_times()
    free = 0
    for core in mine & before.keys() & after.keys():
        idle, total = (a - b for a, b in zip(after[core], before[core], strict=True))
        free += total > 0 and idle >= FREE * total
    return free


def on_free(wanted: int, free: int | None) -> int:
    """``wanted`` threads, at most the ``free`` cores (at least one; all ``wanted`` where the machine does not say)."""
    return wanted if free is None else max(1, min(wanted, free))


def threads_for(flops: float, most: int) -> int:
    """Threads for a training step whose forward pass does ``flops`` floating-point operations: one per
    :data:`FLOPS_PER_THREAD`, at least one, at most ``most`` (the cores torch may use)."""
    return max(1, min(most, int(flops // FLOPS_PER_THREAD)))


def forward_flops(pl_module: Any, batch: Any) -> int:
    """The floating-point operations of ``pl_module``'s training forward pass on ``batch`` (its loss included), run in
    evaluation mode with torch's random state restored, its graph dropped unused: nothing it leaves behind differs."""
    training = pl_module.training
    pl_module.eval()
    try:
        with torch.random.fork_rng(devices=[]), torch.enable_grad(), FlopCounterMode(display=False) as counter:
            pl_module._step(batch)
    finally:
        pl_module.train(training)
    return counter.get_total_flops()


class ThreadRule(pl.Callback):
    """Torch's threads for a run: ``requested`` when given (the user's ``threads=N``), from the moment it is made. Else
    one thread (data and weights are made the same way on every machine) until fitting starts, before anything records
    them: then on a CPU :func:`threads_for` the forward FLOPs of the first training batch, at most torch's default
    (:data:`MOST`), a parallel sweep job's ``share`` of the cores or a data-parallel process's, and the cores free then
    (:func:`free_cores`), looked at again every :data:`RELOOK` seconds of training (a process started beside the run
    takes its core back); on another accelerator the host only feeds the device, and one thread does. :attr:`why` says
    why."""

    def __init__(self, requested: int | None = None, share: int | None = None) -> None:
        self.requested, self.most = requested, min(share or MOST, MOST)
        self.shared = share is not None and share < MOST
        self.why = f"threads={requested}" if requested else "one thread (not training on a CPU)"
        self.wanted, self.next_look = 1, 0.0  # the threads the step pays for where the cores are free; when to look
        self.chosen, self.changes = self.why, 0  # the choice when fitting started; changes since
        torch.set_num_threads(requested or 1)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.requested and trainer.strategy.root_device.type == "cpu":
            if trainer.num_devices > 1:  # data-parallel processes on this machine share its cores
                self.most, self.shared = min(self.most, max(1, MOST // trainer.num_devices)), True
            torch.set_num_threads(self.choose(trainer, pl_module))
            self.chosen, self.next_look = self.why, time.monotonic() + RELOOK

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, idx: int) -> None:
        """Every :data:`RELOOK` seconds, the threads again from the cores free now (only where more would pay)."""
        if self.wanted <= 1 or time.monotonic() < self.next_look:
            return
        free = free_cores()
        threads = on_free(self.wanted, free)
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
            self.changes += 1
            change = f"{threads} from step {trainer.global_step} ({free} {'core' if free == 1 else 'cores'} free)"
            earlier = f" after {self.changes - 1} earlier changes" if self.changes > 1 else ""
            self.why = f"{self.chosen}; {change}{earlier}"  # the first choice and the last change: a bounded record
        self.next_look = time.monotonic() + RELOOK

    def choose(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> int:
        """:func:`threads_for` the first training batch, at most the cores free now; one thread where there is none to
        count, every free core (at most the share) where counting fails. Says why in :attr:`why`."""
        datamodule = getattr(trainer, "datamodule", None)
        if self.most <= 1 or datamodule is None or not hasattr(pl_module, "_step"):
            alone = "at most one thread here (torch's default or the job's share)"
            self.why = alone if self.most <= 1 else "no training batch to count: one thread"
            return 1
        try:
            with torch.random.fork_rng(devices=[]):  # a data module of one's own may draw from torch's generator
                batch = next(iter(datamodule.train_dataloader()), None)
            if batch is None:
                self.why = "no training batch to count: one thread"
                return 1
            flops = forward_flops(pl_module, batch)
            wanted = threads_for(flops, self.most)
            work = f"{flops / 1e9:.3g} GFLOP a training step's forward pass (a thread per {FLOPS_PER_THREAD / 1e9:g})"
        except Exception as err:  # the count only picks a speed: a failure costs the run nothing but that
            log.warning(
                f"Could not count the work of a training step to choose torch's threads ({type(err).__name__}: "
                f"{err}); training on every free core. threads=N chooses them."
            )
            wanted, work = self.most, f"the step could not be counted ({type(err).__name__})"
        return self.at_most_free(wanted, work)

    def at_most_free(self, wanted: int, work: str) -> int:
        """``wanted`` threads, fewer where fewer cores are free (not looked at under deterministic algorithms)."""
        of = f"{self.most} {'cores' if self.most > 1 else 'core'}" + (" (this process's share)" if self.shared else "")
        if wanted <= 1:
            self.why = f"{work}: one thread"
            return 1
        if torch.are_deterministic_algorithms_enabled():
            self.why = f"{work}, at most {of}: {wanted} threads (deterministic: the load not looked at)"
            return wanted
        self.wanted, free = wanted, free_cores()
        threads = on_free(wanted, free)
        fewer = f", not {wanted}: {free} of them free when training started" if threads < wanted else " threads"
        self.why = f"{work}, at most {of}: {threads}{fewer}"
        return threads
