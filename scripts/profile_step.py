"""Where a training step's time goes: the device's kernels, launching them, Lightning's loop, fetching and copying
batches; with the training data on the host (the runner before) and resident on the device (after).

For each mixer (``--models``), the runner's model and data module (``experiment=vit_book data=fashion_mnist`` and any
overrides), from the same weights, trained ``--steps`` steps after ``--warmup`` three ways:

- **plain**: a hand-written loop over batches sliced on the device: forward, backward, optimizer step;
- **device**: Lightning's fit of the runner's module and data module, the data resident on the device;
- **host**: the same fit with the training split on the host, every batch copied to the device at its step.

Each is timed alone (wall ms per step, the device synchronised at both ends only), then run again under
``torch.profiler`` to count per step: the device's busy time (its kernels and copies), kernel launches, host-to-device
copies and the host's waits for the device. The shares: **launch-bound** where plain's wall time exceeds the kernels'
(the host, not the device, sets the pace), **Lightning's loop** = device - plain, **batches from the host** = host -
device. ``--share N ...`` also runs N copies of the device fit at once, as a sweep's jobs share one GPU, and reports
their steps per second together.

    ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/profile_step.py --models dot euclid --share 1 3 6
    PYTHONPATH=. python scripts/profile_step.py --device cpu --steps 20 --models dot data=digits
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import pytorch_lightning as pl
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from smoke import parsed
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from attnexp.cli.build import network as build_net
from attnexp.cli.train import CONFIG_DIR
from attnexp.data.tensor_loader import tensor_loader

DEFAULT = ["experiment=vit_book", "data=fashion_mnist", "data.download=false"]
LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
WAITS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def build(overrides: list[str], device: torch.device) -> tuple[Any, Any, Any]:
    """The composed config, its data module (set up) and module (seed 0), as the runner builds them."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    pl.seed_everything(0, verbose=False)
    datamodule = instantiate(cfg.data)
    module = instantiate(cfg.module, net=build_net(cfg.net, datamodule.spec), task=instantiate(cfg.task))
    datamodule.setup("fit")
    module.task.bind(datamodule)
    return cfg, datamodule, module


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def plain_loop(datamodule: Any, module: Any, device: torch.device, precision: str) -> Callable[[int], None]:
    """``run(n)``: n steps of a hand-written loop, batches sliced on the device from one permutation."""
    module.to(device).train()
    optimizer = module.configure_optimizers()
    optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
    x, y = (t.to(device) for t in datamodule.splits["train"])
    order = torch.randperm(len(x)).to(device)
    batches = order.split(datamodule.batch_size)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if precision.startswith("bf16") else nullcontext()
    at = [0]

    def run(n: int) -> None:
        for _ in range(n):
            idx = batches[at[0] % (len(batches) - 1)]  # the last, short batch left out
            at[0] += 1
            with autocast:
                loss = module._step((x[idx], y[idx]))[0]
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    return run


class Window(pl.Callback):
    """Times (and, with ``profiler``, profiles) the training steps after the first ``warmup``: from the end of batch
    ``warmup - 1`` to the end of the last, the device synchronised at both ends."""

    def __init__(self, warmup: int, device: torch.device, profiler: Any = None) -> None:
        self.warmup, self.device, self.profiler = warmup, device, profiler
        self.started = self.seconds = self.wall_start = self.wall_end = 0.0

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, idx: int) -> None:
        if idx == self.warmup - 1:
            sync(self.device)
            self.started, self.wall_start = time.perf_counter(), time.time()
            if self.profiler is not None:
                self.profiler.start()

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        sync(self.device)
        self.seconds, self.wall_end = time.perf_counter() - self.started, time.time()
        if self.profiler is not None:
            self.profiler.stop()


def fit(
    datamodule: Any, module: Any, device: torch.device, precision: str, steps: int, warmup: int, where: str, prof=None
) -> Window:
    """Lightning's fit of ``steps`` steps after ``warmup`` (the training data on the device or the host): its timed
    window."""
    if where == "host":
        datamodule.train_dataloader = lambda: tensor_loader(*datamodule.splits["train"], datamodule.batch_size, True)
    window = Window(warmup, device, prof)
    trainer = pl.Trainer(
        accelerator=device.type,
        devices=1,
        precision=precision,
        max_epochs=1,
        limit_train_batches=warmup + steps,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[window],
    )
    trainer.fit(module, datamodule=datamodule)
    return window


def counts(prof: Any, steps: int) -> dict[str, float]:
    """Per step, from a profile: the device's busy ms (its kernels and copies), kernel launches, host-to-device
    copies, the host's waits for the device."""
    busy, launches, copies, waits = 0.0, 0, 0, 0
    for event in prof.events():
        on_device = event.device_type == DeviceType.CUDA
        busy += event.device_time_total if on_device else 0.0
        copies += on_device and "HtoD" in event.name
        launches += not on_device and event.name in LAUNCHES
        waits += not on_device and event.name in WAITS
    return {"busy_ms": busy / 1e3 / steps, "launches": launches / steps, "h2d": copies / steps, "waits": waits / steps}


def measure(overrides: list[str], device: torch.device, precision: str, steps: int, warmup: int) -> dict[str, Any]:
    """Wall ms per step of plain, device and host, and each one's profile counts."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    found: dict[str, Any] = {}
    for way in ("plain", "device", "host"):
        for profiled in (False, True):
            _, datamodule, module = build(overrides, device)
            prof = profile(activities=activities) if profiled else None
            if way == "plain":
                run = plain_loop(datamodule, module, device, precision)
                run(warmup)
                sync(device)
                started = time.perf_counter()
                with prof or nullcontext():
                    run(steps)
                    sync(device)
                seconds = time.perf_counter() - started
            else:
                seconds = fit(datamodule, module, device, precision, steps, warmup, way, prof).seconds
            if profiled:
                found[way].update(counts(prof, steps))
            else:
                found[way] = {"ms": seconds / steps * 1e3}
    return found


def shared(overrides: list[str], device: torch.device, precision: str, steps: int, warmup: int, jobs: int) -> float:
    """Steps per second of ``jobs`` copies of the device fit run at once, each in its own process (a sweep's jobs)."""
    command = [sys.executable, __file__, "--worker", "--device", str(device), "--precision", precision]
    command += ["--steps", str(steps), "--warmup", str(warmup), *overrides]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))}
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) for _ in range(jobs)]
    outs = [json.loads(p.communicate()[0].splitlines()[-1]) for p in procs]
    # from the last to start its window to the first to end its window: every job ran throughout
    overlap = min(o["end"] for o in outs) - max(o["start"] for o in outs)
    rates = [steps / o["seconds"] for o in outs]
    return sum(rates) if overlap > 0 else float("nan")


def worker(overrides: list[str], device: torch.device, precision: str, steps: int, warmup: int) -> None:
    """One job of :func:`shared`: the device fit, its window's start, end and length on the wall clock."""
    torch.set_num_threads(1)
    _, datamodule, module = build(overrides, device)
    window = fit(datamodule, module, device, precision, steps, warmup, "device")
    print(json.dumps({"seconds": window.seconds, "start": window.wall_start, "end": window.wall_end}))


def report(model: str, found: dict[str, Any], device: torch.device) -> list[str]:
    """The Markdown rows and shares of one mixer."""
    rows = [f"\n#### model={model}\n", "| way | ms/step | device busy ms | launches | host-to-device copies | waits |"]
    rows.append("|---|---|---|---|---|---|")
    for way, f in found.items():
        busy = f"{f['busy_ms']:.2f}" if device.type == "cuda" else "-"
        rows.append(f"| {way} | {f['ms']:.2f} | {busy} | {f['launches']:.0f} | {f['h2d']:.1f} | {f['waits']:.1f} |")
    plain, dev, host = found["plain"]["ms"], found["device"]["ms"], found["host"]["ms"]
    if device.type == "cuda":
        kernels = found["plain"]["busy_ms"]
        rows.append(
            f"\nplain: kernels {kernels:.2f} ms of {plain:.2f} ms per step (the device busy {kernels / plain:.0%} "
            f"of the time; {'launch-bound' if kernels < 0.8 * plain else 'device-bound'})"
        )
    rows.append(
        f"Lightning's loop: {dev - plain:+.2f} ms per step ({dev / plain:.2f}x plain); batches from the host: "
        f"{host - dev:+.2f} ms per step (host / device {host / dev:.2f})"
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["dot", "euclid"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", help="Lightning's precision (default: bf16-mixed on a GPU, 32-true on a CPU)")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--share", type=int, nargs="*", default=[], help="jobs at once on one device, e.g. 1 3 6")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help=f"Hydra overrides (default: {' '.join(DEFAULT)})")
    args = parsed(parser, steps=3, warmup=1)
    if args.smoke:  # a small network on a small split
        args.overrides = [*(args.overrides or DEFAULT), "data.val_size=100", "net.depth=1"]
    device = torch.device(args.device)
    precision = args.precision or ("bf16-mixed" if device.type == "cuda" else "32-true")
    if args.worker:
        worker(args.overrides, device, precision, args.steps, args.warmup)
        return
    torch.set_num_threads(1)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{os.cpu_count()} CPUs"
    base = args.overrides or DEFAULT
    out = [f"### profile_step: {' '.join(base)}, {precision}, {name}, torch {torch.__version__}"]
    for model in args.models:
        overrides = [*base, f"model={model}"]
        out += report(model, measure(overrides, device, precision, args.steps, args.warmup), device)
        for jobs in args.share:
            rate = shared(overrides, device, precision, args.steps, args.warmup, jobs)
            out.append(f"{jobs} job(s) at once: {rate:.1f} steps/s together ({1e3 / rate:.2f} ms per step)")
    load = os.getloadavg()
    out.append(f"\n{args.steps} steps after {args.warmup}; load average {load[0]:.2f} on {os.cpu_count()} CPUs")
    print("\n".join(out))


if __name__ == "__main__":
    main()
