"""What the attention telemetry costs an epoch: runs with and without it, alternating in one process.

Each round trains the runner's config (``data=mnist`` one-layer model by default) for ``--epochs`` with the
telemetry callback and without it (``callbacks.telemetry=null``), and times the callback's own work.
Prints the median seconds per epoch of both and the callback's share of an epoch.

    ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/bench_telemetry.py --rounds 3 model=euclid
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict
from smoke import SMALL_RUN, parsed

from attnexp.cli.train import CONFIG_DIR, train
from attnexp.runs import metrics_file
from attnexp.training.callbacks.telemetry import AttentionTelemetry


class TimedTelemetry(AttentionTelemetry):
    """The telemetry callback, timing its own work."""

    seconds = 0.0

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        started = time.perf_counter()
        super().on_validation_epoch_end(trainer, pl_module)
        TimedTelemetry.seconds += time.perf_counter() - started


def fit(overrides: list[str], telemetry: bool, out: Path) -> float:
    """Seconds per epoch of one fit."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(out)
        cfg.callbacks.telemetry = {"_target_": "__main__.TimedTelemetry"} if telemetry else None
    HydraConfig.instance().set_config(cfg)
    train(cfg)
    return metrics_file.read(out)["seconds_per_epoch"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (default: data=mnist)")
    args = parsed(parser, rounds=1, epochs=1)
    args.overrides += SMALL_RUN if args.smoke else []
    torch.set_num_threads(args.threads)
    overrides = [
        "data=mnist",
        "data.download=false",
        f"paths.data_dir={os.environ.get('ATTNEXP_DATA_DIR', 'data')}",
        f"trainer.max_epochs={args.epochs}",
        "trainer.accelerator=cpu",
        "test=false",
        "logger=none",
        "callbacks.progress_bar.refresh_rate=0",
        "callbacks.figures=null",
        *args.overrides,
    ]
    times: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for telemetry in (False, True):
                times[telemetry].append(fit(overrides, telemetry, Path(tmp) / f"{r}-{telemetry}"))
    per_epoch = TimedTelemetry.seconds / (args.rounds * args.epochs)
    without, with_ = statistics.median(times[False]), statistics.median(times[True])
    print(
        f"bench_telemetry: {' '.join(args.overrides) or 'data=mnist'}, {args.epochs} epochs x {args.rounds} rounds, "
        f"{args.threads} thread(s); load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"s/epoch without {without:.3f}, with {with_:.3f}: ratio {with_ / without:.3f}; "
        f"the callback's own work {per_epoch * 1e3:.1f} ms an epoch = {per_epoch / without:.2%} of an epoch"
    )


if __name__ == "__main__":
    main()
