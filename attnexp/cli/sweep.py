"""Hydra callback for sweeps: one folder for all jobs, a summary at the end, failures in the exit status."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict

from attnexp.cli import record
from attnexp.cli.compare import find_runs, table, write_summary

log = logging.getLogger("attnexp")


class SweepCallback(Callback):
    """Pins the sweep folder at the start; writes summary.csv, summary.md and plots at the end."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # Jobs re-resolve hydra.sweep.dir, in other processes too (joblib): hand them the folder
        # chosen here (a new one, or the resumed one) as a literal override.
        folder = str(config.hydra.sweep.dir)
        with open_dict(config):
            config.hydra.sweep.dir = folder
            config.hydra.overrides.hydra.append(f"hydra.sweep.dir='{folder}'")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        runs = find_runs([sweep_dir])
        if not runs:
            return
        rows = write_summary(runs, sweep_dir)
        print(f"\nSweep summary ({sweep_dir}):\n\n{table(rows)}", flush=True)
        failed = [r for r in runs if r.metrics.get("status") != record.OK]
        if failed:
            log.error(f"{len(failed)} of {len(runs)} jobs did not finish: " + ", ".join(r.folder.name for r in failed))
            sys.exit(1)
