"""How OpenMP's waiting decides whether a second thread pays: the training step of a configuration's composed module
on one thread, on two with OpenMP's default waiting (a spin, then sleep) and on two sleeping (``OMP_WAIT_POLICY=
PASSIVE``), each in a fresh process (OpenMP reads its waiting when torch loads), quiet or beside a busy process.

A step is the module's loss on a batch, its backward pass and the optimizer's step (``configure_optimizers``), no
Lightning loop: the arithmetic the thread count changes. Each process times ``--steps`` steps over 8 batches after a
warm-up, ``--rounds`` times, and prints the median ms a step; the table gives each setting's range over ``--repeats``
processes. ``--busy`` starts ``python -c "while True: pass"`` before each process and stops it after.

    ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/bench_waiting.py experiment=nanogpt_char
    ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/bench_waiting.py --busy experiment=nanogpt_char
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from bench_threads import beside_busy, machine  # the script beside this one
from smoke import parsed

SETTINGS = {  # name -> (threads, environment)
    "1 thread": (1, {}),
    "2 threads, OpenMP's default waiting": (2, {}),
    "2 threads, OMP_WAIT_POLICY=PASSIVE": (2, {"OMP_WAIT_POLICY": "PASSIVE"}),
}


def steps_ms(overrides: list[str], threads: int, steps: int, rounds: int) -> float:
    """In this process: the median ms of a training step of the composed module over ``rounds`` rounds."""
    import torch
    from profile_step import build  # the script beside this one: the runner's module and data, set up

    _, datamodule, module = build(overrides, torch.device("cpu"))
    optimizer = module.configure_optimizers()
    optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
    batches = [b for _, b in zip(range(8), datamodule.train_dataloader(), strict=False)]
    torch.set_num_threads(threads)

    def step(batch) -> None:
        module._step(batch)[0].backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for batch in batches:
        step(batch)
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for i in range(steps):
            step(batches[i % len(batches)])
        times.append((time.perf_counter() - started) / steps * 1e3)
    return statistics.median(times)


def in_fresh_process(overrides: list[str], threads: int, env: dict[str, str], args: argparse.Namespace) -> float:
    """:func:`steps_ms` in a fresh process with ``env`` (and no OMP_WAIT_POLICY of this one's unless given)."""
    environ = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"} | env
    command = [sys.executable, __file__, "--measure", str(threads), "--steps", str(args.steps)]
    command += ["--rounds", str(args.rounds), *overrides]
    with beside_busy(args.busy):
        done = subprocess.run(command, capture_output=True, text=True, env=environ, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the measuring process failed:\n{done.stderr[-2000:]}")
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2, help="processes per setting")
    parser.add_argument("--busy", action="store_true", help="beside a Python busy-loop")
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)  # the measuring process: its threads
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (default: data=mnist model=dot)")
    args = parsed(parser, steps=2, rounds=1, repeats=1)
    overrides = args.overrides or ["data=digits" if args.smoke else "data=mnist", "model=dot"]
    if args.measure:
        print(f"{steps_ms(overrides, args.measure, args.steps, args.rounds):.3f}")
        return
    found: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for _ in range(args.repeats):  # the settings in turns
        for name, (threads, env) in SETTINGS.items():
            found[name].append(in_fresh_process(overrides, threads, env, args))
    where = "beside a busy process" if args.busy else "quiet"
    print(f"bench_waiting: {' '.join(overrides)}, {where}; {machine()}")
    print("\n| setting | ms a step (range over processes) |\n|---|---|")
    for name, values in found.items():
        print(f"| {name} | {min(values):.2f}-{max(values):.2f} |")


if __name__ == "__main__":
    main()
