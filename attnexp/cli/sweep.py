"""Hydra callback for sweeps: job links named by what varies (``model=euclid/seed=1``, TensorBoard's run names), the
comparison of the jobs at the end (:mod:`attnexp.comparison`), failures in the exit status. Ctrl-C or SIGTERM ends the
sweep and its jobs: their records read ``abandoned`` and ``resume=true`` continues them."""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from attnexp.cli import command
from attnexp.comparison.files import write_all
from attnexp.comparison.naming import find_runs
from attnexp.comparison.render import markdown
from attnexp.comparison.runs import Run, left_out_notes
from attnexp.comparison.summary import DEFAULT_TUNE, Comparison, RepeatedSeeds, compare
from attnexp.runs import lock, metrics_file, tracker_comparison, trackers

log = logging.getLogger("attnexp")


class SweepCallback(Callback):
    """Names job links by the overrides that vary, and writes the comparison when the sweep ends."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # SIGTERM and SIGINT to this process end the sweep as Ctrl-C does, also where SIGINT was ignored when it
        # started (a script's background job, `attnexp ... &`), as a single run's fit handles SIGINT itself
        for stop in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop, signal.default_int_handler)
        command.note_sweep(Path(config.hydra.sweep.dir), str(config.hydra.launcher.get("_target_")))
        trackers.prepare(config)  # each MLflow store made once, before the jobs that write to it start

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        runs, busy = find_runs([sweep_dir]), busy_jobs(sweep_dir)
        if busy:
            log.error(
                f"{len(busy)} job{'s' if len(busy) > 1 else ''} of the sweep {'were' if len(busy) > 1 else 'was'} "
                f"skipped, another process training {'their runs' if len(busy) > 1 else 'its run'}: {', '.join(busy)}. "
                "Run the same sweep again once that process ends: the jobs it finished are reported and skipped, the "
                "others run."
            )
        if not runs:
            sys.exit(1 if busy else 0)
        unfinished = (*metrics_file.STOPPED, metrics_file.INVALID, metrics_file.RUNNING, metrics_file.ABANDONED)
        failed = [
            f"{r.folder} ({r.metrics['status'].replace('_', ' ')})" for r in runs if r.metrics["status"] in unfinished
        ]
        if any(r.comparable for r in runs):
            try:
                result = summary(runs, config.get("compare") or {})
            except RepeatedSeeds as err:  # attnexp-compare's refusal: no summary; the jobs' runs are kept
                log.error(f"No summary of {sweep_dir}: {err} Then attnexp-compare {sweep_dir} writes it.")
            else:
                written = write_all(result, sweep_dir)
                shown = tracker_comparison.compared(result, written, sweep_dir)  # a parent run or group, verdicts
                in_tensorboard = any(tracker_kind(n) == "tensorboard" for n in trackers.nodes(config).values())
                text = markdown(result)
                if in_tensorboard:
                    write_text_summary(sweep_dir, text)
                    shown.insert(0, f"tensorboard --logdir {sweep_dir}")
                curves = f"\nCurves: {'; '.join(shown)}" if shown else ""
                print(f"{curves}\nSweep summary ({sweep_dir}):\n\n{text}", flush=True)
        else:
            log.error(f"No job of {sweep_dir} gave numbers to compare. " + " ".join(left_out_notes(runs)))
        if failed:
            log.error(f"{len(failed)} of {len(runs)} jobs did not finish or are invalid: " + ", ".join(failed))
        if failed or busy:
            sys.exit(1)


def summary(runs: list[Run], options: DictConfig | dict) -> Comparison:
    """The comparison of the sweep's runs with its ``compare`` options, as attnexp-compare makes it; a baseline that
    matches no configuration gives way to the default one, said. Repeated seeds are refused (:class:`RepeatedSeeds`)."""
    tune, columns = list(options.get("tune") or DEFAULT_TUNE), list(options.get("columns") or [])
    settings = (tune, columns, dict(options.get("margin") or {}))
    try:
        return compare(runs, options.get("baseline"), *settings)
    except RepeatedSeeds:
        raise
    except ValueError as err:  # a baseline that matches no configuration
        log.error(f"compare: {err} Compared with the default baseline instead.")
        return compare(runs, None, *settings)


def tracker_kind(node: DictConfig) -> str:
    return str(node.get("_target_", "")).rpartition(".")[2].removesuffix("Logger").lower()


def busy_jobs(sweep_dir: Path) -> list[str]:
    """The sweep's jobs whose run another process trains (each was skipped), named by their links
    (``model=euclid/seed=1``) with that process."""
    found = []
    for top, folders, _ in sorted(os.walk(sweep_dir)):
        for name in sorted(folders):
            link = Path(top, name)
            pid = lock.holder(link) if link.is_symlink() else None
            if pid is not None:
                found.append(f"{link.relative_to(sweep_dir)} (process {pid or '?'})")
    return found


def write_text_summary(sweep_dir: Path, text: str) -> None:
    """The summary in TensorBoard's Text tab, as the run ``summary`` of the sweep folder."""
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(sweep_dir / "summary")) as writer:
        writer.add_text("sweep summary", text, global_step=0)
