"""Training-step time of ``experiment=nanogpt_char`` against nanoGPT's own ``train.py`` with the same recipe, like
for like: the wall time of ``--steps`` optimizer steps of each tool's own loop, batch fetching included, start-up
reported apart.

Runs nanoGPT (a checkout given with ``--nanogpt``, its Tiny Shakespeare prepared with
``data/shakespeare_char/prepare.py``) and the ``attnexp`` command in turns, each a fresh process, ``--rounds`` times.
Each tool's loop is timed from the end of its first optimizer step to the end of its last (``--steps`` steps later):
nanoGPT at the line it prints after every iteration (forward, next batch, backward, clipping, AdamW step and its log
line), read by a wrapper that watches its ``print`` (its code runs unchanged); attnexp by a callback at the end of
every training batch (Lightning's loop with the runner's callbacks: the batch fetch, the step and every hook). Wall
and CPU time (``time.process_time``: every thread of the process, less disturbed by other work on a shared machine)
are taken at the same points; start-up is the rest of the process's wall time (imports, data, the first step,
nanoGPT's evaluation at iteration 0 and attnexp's validation at the end, exit). Both get ``--threads`` torch threads
(``OMP_NUM_THREADS``, and ``threads=`` for attnexp); ``--threads 0`` leaves each tool its own default.

    ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/bench_nanogpt.py --nanogpt /path/to/nanoGPT --threads 1

``--losses SEED ...`` instead runs nanoGPT's whole recipe (2000 iterations, its validation estimate from 200
batches) once per seed and prints its final val loss: nanoGPT seeds torch with 1337, so a seed here is added to
that number (the only change to its run); attnexp's side is ``attnexp experiment=nanogpt_char seed=S``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl

NANOGPT_RECIPE = [
    "config/train_shakespeare_char.py",
    "--device=cpu",
    "--compile=False",
    "--block_size=64",
    "--batch_size=12",
    "--n_layer=4",
    "--n_head=4",
    "--n_embd=128",
    "--dropout=0.0",
    "--lr_decay_iters=2000",
    "--log_interval=1",
]


# Runs nanoGPT's train.py unchanged, noting the clocks at each "iter N:" line it prints (after each iteration).
WATCHED = """
import builtins, json, os, runpy, time
marks, shown = [], builtins.print
def watched(*args, **kwargs):
    if args and str(args[0]).startswith("iter "):
        marks.append((time.perf_counter(), time.process_time()))
    shown(*args, **kwargs)
builtins.print = watched
try:
    runpy.run_path("train.py", run_name="__main__")
finally:
    json.dump(marks, open(os.environ["BENCH_MARKS"], "w"))
"""


class StepClock(pl.Callback):
    """The clocks at the end of every training batch (one optimizer step each), written to ``path`` when training
    ends."""

    def __init__(self, path: str) -> None:
        self.path, self.marks = path, []

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, idx: int) -> None:
        self.marks.append((time.perf_counter(), time.process_time()))

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        Path(self.path).write_text(json.dumps(self.marks))


def timed(command: list[str], cwd: Path, env: dict[str, str], marks: Path, steps: int) -> dict[str, float]:
    """Run ``command``; ms per step of wall and CPU time from the first of its marks to the ``steps``-th after it, and
    the seconds of its process outside that loop."""
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True)
    total = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    found = json.loads(marks.read_text())
    if len(found) <= steps:
        raise SystemExit(f"{' '.join(command[:4])} made {len(found)} steps, fewer than {steps + 1}")
    (wall0, cpu0), (wall1, cpu1) = found[0], found[steps]
    return {"wall": (wall1 - wall0) / steps * 1e3, "cpu": (cpu1 - cpu0) / steps * 1e3, "start": total - wall1 + wall0}


def nanogpt_steps(checkout: Path, steps: int, threads: int) -> dict[str, float]:
    """nanoGPT's loop: :func:`timed` over iterations 0 to ``steps`` (evaluated once, at iteration 0, on one batch)."""
    with tempfile.TemporaryDirectory() as out:
        recipe = [*NANOGPT_RECIPE, f"--max_iters={steps}", f"--eval_interval={steps + 1}", "--eval_iters=1"]
        env = {"BENCH_MARKS": f"{out}/marks.json", **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
        command = [sys.executable, "-c", WATCHED, *recipe, f"--out_dir={out}"]
        return timed(command, checkout, env, Path(out) / "marks.json", steps)


def attnexp_steps(steps: int, threads: int) -> dict[str, float]:
    """The ``attnexp`` command's loop: :func:`timed` over ``steps + 1`` batches of ``experiment=nanogpt_char`` (no
    test; its 8 validation windows after the loop)."""
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as out:
        overrides = [
            "experiment=nanogpt_char",
            f"data.windows={12 * (steps + 1)}",
            "test=false",
            f"hydra.run.dir={out}/run",
            "+callbacks.step_clock._target_=scripts.bench_nanogpt.StepClock",
            f"+callbacks.step_clock.path={out}/marks.json",
            *([f"threads={threads}"] if threads else []),
        ]
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")]))}
        env |= {"OMP_NUM_THREADS": str(threads)} if threads else {}
        command = [sys.executable, "-m", "attnexp.cli.train", *overrides]
        return timed(command, repo, env, Path(out) / "marks.json", steps)


def nanogpt_val_loss(checkout: Path, seed: int, threads: int) -> float:
    """nanoGPT's val loss after its whole recipe, its torch seed 1337 + ``seed``."""
    offset = (
        "import sys, runpy, torch; seed = torch.manual_seed; "
        f"torch.manual_seed = lambda s: seed(s + {seed}); runpy.run_path('train.py', run_name='__main__')"
    )
    with tempfile.TemporaryDirectory() as out:
        cmd = [
            sys.executable,
            "-c",
            offset,
            *NANOGPT_RECIPE,
            "--max_iters=2000",
            "--eval_iters=200",
            f"--out_dir={out}",
        ]
        log = subprocess.run(
            cmd,
            cwd=checkout,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "OMP_NUM_THREADS": str(threads)},
        ).stdout
    return float(re.findall(r"step 2000: train loss [\d.]+, val loss ([\d.]+)", log)[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--nanogpt", type=Path, required=True, help="a nanoGPT checkout with data/shakespeare_char prepared"
    )
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of both (0: each tool's own default)")
    parser.add_argument(
        "--losses", type=int, nargs="+", metavar="SEED", help="nanoGPT's final val loss for these seeds instead"
    )
    args = parser.parse_args()
    if args.losses:
        losses = [nanogpt_val_loss(args.nanogpt, seed, args.threads) for seed in args.losses]
        for seed, loss in zip(args.losses, losses, strict=True):
            print(f"nanoGPT seed 1337+{seed}: val loss {loss:.4f}")
        print(f"mean {statistics.mean(losses):.4f} over {len(losses)} seeds")
        return
    os.environ.setdefault("ATTNEXP_DATA_DIR", str(Path("data").resolve()))
    rounds = []
    for i in range(args.rounds):  # the order alternates: neither tool always runs right after the other
        pair = [("nanoGPT", lambda: nanogpt_steps(args.nanogpt, args.steps, args.threads))]
        pair.append(("attnexp", lambda: attnexp_steps(args.steps, args.threads)))
        found = {name: run() for name, run in (pair if i % 2 == 0 else pair[::-1])}
        rounds.append(found)
        ng, ax = found["nanoGPT"], found["attnexp"]
        print(
            f"round {i}: nanoGPT {ng['wall']:.2f} ms/step ({ng['cpu']:.2f} CPU), start-up {ng['start']:.1f} s; "
            f"attnexp {ax['wall']:.2f} ms/step ({ax['cpu']:.2f} CPU), start-up {ax['start']:.1f} s; "
            f"attnexp/nanoGPT {ax['wall'] / ng['wall']:.3f} wall, {ax['cpu'] / ng['cpu']:.3f} CPU",
            flush=True,
        )
    wall = statistics.median(r["attnexp"]["wall"] / r["nanoGPT"]["wall"] for r in rounds)
    cpu = statistics.median(r["attnexp"]["cpu"] / r["nanoGPT"]["cpu"] for r in rounds)
    start = {name: statistics.median(r[name]["start"] for r in rounds) for name in ("nanoGPT", "attnexp")}
    load = os.getloadavg()
    threads = args.threads or "each tool's default"
    import torch

    print(
        f"\nbench_nanogpt: {args.steps} steps x {args.rounds} rounds, {threads} thread(s); "
        f"attnexp/nanoGPT per step: median {wall:.3f} wall, "
        f"{cpu:.3f} CPU; start-up (median) nanoGPT {start['nanoGPT']:.1f} s, attnexp {start['attnexp']:.1f} s; "
        f"torch {torch.__version__}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
