"""Hydra callback: when a sweep ends, summarize its runs and report failures in the exit status."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from attnexp.compare import find_runs, table, write_summary

log = logging.getLogger("attnexp")


class SweepSummary(Callback):
    """Writes summary.csv, summary.md and plots into the sweep folder and prints the table."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        runs = find_runs([sweep_dir])
        if not runs:
            return
        rows = write_summary(runs, sweep_dir)
        print(f"\nSweep summary ({sweep_dir}):\n\n{table(rows)}", flush=True)
        failed = [r for r in runs if r.metrics.get("status") != "ok"]
        if failed:
            log.error(f"{len(failed)} of {len(runs)} jobs did not finish: " + ", ".join(r.folder.name for r in failed))
            sys.exit(1)
