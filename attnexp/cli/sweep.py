"""Hydra callback for sweeps: one folder for all jobs named by what varies, a summary at the end, failures in the
exit status."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict

from attnexp.comparison.files import write_all
from attnexp.comparison.render import markdown
from attnexp.comparison.tables import DEFAULT_TUNE, compare
from attnexp.runs import metrics_file
from attnexp.runs.folders import find_runs

log = logging.getLogger("attnexp")


def fixed_keys(task_overrides: list[str]) -> list[str]:
    """The keys of command-line overrides that are the same for every job (``data=mnist`` in a sweep over models)."""
    parsed = OverridesParser.create().parse_overrides(task_overrides)
    return [o.key_or_group for o in parsed if not o.is_sweep_override()]


class SweepCallback(Callback):
    """Pins the sweep folder and names job folders by the overrides that vary (``model=euclid/seed=1``: TensorBoard's
    run names under the sweep folder); writes the comparison (:mod:`attnexp.comparison`) at the end."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # Jobs re-resolve hydra.sweep.dir and compose their own configs, in other processes too (joblib):
        # hand them the folder chosen here (a new one, or the resumed one) and the keys to leave out of
        # their folder names as literal overrides.
        folder = str(config.hydra.sweep.dir)
        exclude = list(dict.fromkeys([*config.hydra.job.config.override_dirname.exclude_keys, *fixed_keys(list(config.hydra.overrides.task))]))
        with open_dict(config):
            config.hydra.sweep.dir = folder
            config.hydra.job.config.override_dirname.exclude_keys = exclude
            config.hydra.overrides.hydra.append(f"hydra.sweep.dir='{folder}'")
            config.hydra.overrides.hydra.append(
                "hydra.job.config.override_dirname.exclude_keys=[" + ",".join(f"'{k}'" for k in exclude) + "]"
            )

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        runs = find_runs([sweep_dir])
        if not runs:
            return
        options = config.get("compare") or {}
        settings = (list(options.get("tune") or DEFAULT_TUNE), list(options.get("columns") or []), dict(options.get("margin") or {}))
        try:
            result = compare(runs, options.get("baseline"), *settings)
        except ValueError as err:  # a baseline that matches no configuration, or runs repeated
            log.error(f"compare: {err}")
            try:
                result = compare(runs, None, *settings)
                log.error("Compared with the default baseline instead.")
            except ValueError:
                return
        write_all(result, sweep_dir)
        text = markdown(result)
        write_text_summary(sweep_dir, text)
        failed = [r for r in runs if r.metrics.get("status") != metrics_file.OK]
        if failed:
            log.error(f"{len(failed)} of {len(runs)} jobs did not finish: " + ", ".join(r.config() + f" seed {r.seed}" for r in failed))
        print(f"\nCurves: tensorboard --logdir {sweep_dir}\nSweep summary ({sweep_dir}):\n\n{text}", flush=True)
        if failed:
            sys.exit(1)


def write_text_summary(sweep_dir: Path, text: str) -> None:
    """The summary in TensorBoard's Text tab, as the run ``summary`` of the sweep folder."""
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(sweep_dir / "summary")) as writer:
        writer.add_text("sweep summary", text, global_step=0)
