"""Training-step time of ``experiment=nanogpt_char`` against nanoGPT's own ``train.py`` with the same recipe.

Runs nanoGPT (a checkout given with ``--nanogpt``, its Tiny Shakespeare prepared with
``data/shakespeare_char/prepare.py``) and attnexp in turns in this process's machine, ``--rounds`` times each, for
``--steps`` optimizer steps (no evaluation in between). A step is nanoGPT's own per-iteration time (what its log
prints: the forward, backward, clipping and AdamW step of one batch, and fetching the next batch) and attnexp's
median time per optimizer step inside its training calls (several steps per call; validation, checkpoints and
start-up left out). The ratio of medians is reported; both use the same number of torch threads.

    PYTHONPATH=. python scripts/bench_nanogpt.py --nanogpt /path/to/nanoGPT --threads 2

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


class StepTimer(pl.Callback):
    """Seconds per optimizer step inside each training call (a call trains several batches)."""

    def __init__(self) -> None:
        self.per_step: list[float] = []

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch, batch_idx: int) -> None:
        self.started, self.step = time.perf_counter(), trainer.global_step

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs, batch, batch_idx: int
    ) -> None:
        steps = trainer.global_step - self.step
        if steps:
            self.per_step.append((time.perf_counter() - self.started) / steps)


def nanogpt_ms(checkout: Path, steps: int, threads: int) -> float:
    """Median of nanoGPT's printed per-iteration times over ``steps`` iterations (the first 5 left out)."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [
            sys.executable,
            "train.py",
            *NANOGPT_RECIPE,
            f"--max_iters={steps}",
            f"--eval_interval={steps + 1}",
            "--eval_iters=1",
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
    times = [float(ms) for it, ms in re.findall(r"iter (\d+): loss [\d.]+, time ([\d.]+)ms", log) if int(it) >= 5]
    return statistics.median(times)


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


def attnexp_ms(steps: int, threads: int) -> float:
    """Median seconds per optimizer step of ``experiment=nanogpt_char`` for ``steps`` steps, in a subprocess (ms)."""
    code = (
        "import json, sys; from scripts.bench_nanogpt import run_attnexp; "
        f"print(json.dumps(run_attnexp({steps}, {threads})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))},
    )
    return json.loads(out.stdout.splitlines()[-1])


def run_attnexp(steps: int, threads: int) -> float:
    """:func:`attnexp_ms` inside its subprocess: the composed experiment, trained ``steps`` steps, no test."""
    import torch
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from attnexp.cli.train import CONFIG_DIR, build_net

    torch.set_num_threads(threads)
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=["experiment=nanogpt_char", f"data.windows={12 * steps}"])
    pl.seed_everything(0, verbose=False)
    datamodule = instantiate(cfg.data)
    module = instantiate(cfg.module, net=build_net(cfg.net, datamodule.spec), task=instantiate(cfg.task))
    timer = StepTimer()
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        callbacks=[timer],
    )
    trainer.fit(module, datamodule=datamodule)
    return statistics.median(timer.per_step[1:]) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--nanogpt", type=Path, required=True, help="a nanoGPT checkout with data/shakespeare_char prepared"
    )
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
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
    rounds = [
        (nanogpt_ms(args.nanogpt, args.steps, args.threads), attnexp_ms(args.steps, args.threads))
        for _ in range(args.rounds)
    ]
    for i, (ng, ax) in enumerate(rounds):
        print(f"round {i}: nanoGPT {ng:.2f} ms/step, attnexp {ax:.2f} ms/step, attnexp/nanoGPT {ax / ng:.3f}")
    ratio = statistics.median(ax / ng for ng, ax in rounds)
    load = os.getloadavg()
    print(
        f"\nbench_nanogpt: {args.steps} steps x {args.rounds} rounds, {args.threads} thread(s); "
        f"attnexp/nanoGPT median {ratio:.3f}; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
