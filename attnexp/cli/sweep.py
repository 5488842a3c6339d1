"""Hydra callback for sweeps: checks before anything runs, one folder for all jobs named by what varies, a clean stop
on SIGINT or SIGTERM, a summary at the end, failures in the exit status."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from attnexp import stop_request
from attnexp.cli import sweep_signals
from attnexp.cli.sweep_checks import check_distinct_folders, check_launcher
from attnexp.comparison.files import write_all
from attnexp.comparison.naming import find_runs
from attnexp.comparison.render import markdown
from attnexp.comparison.runs import Run, left_out_notes
from attnexp.comparison.summary import DEFAULT_TUNE, compare
from attnexp.errors import EXIT_CODES
from attnexp.runs import metrics_file, refusals

log = logging.getLogger("attnexp")


def fixed_keys(task_overrides: list[str]) -> list[str]:
    """The keys of command-line overrides that are the same for every job (``data=mnist`` in a sweep over models)."""
    parsed = OverridesParser.create().parse_overrides(task_overrides)
    return [o.key_or_group for o in parsed if not o.is_sweep_override()]


class SweepCallback(Callback):
    """Pins the sweep folder and names job folders by the overrides that vary (``model=euclid/seed=1``: TensorBoard's
    run names under the sweep folder); writes the comparison (:mod:`attnexp.comparison`) at the end."""

    jobs: int | None = None  # how many jobs the sweep has, where the sweeper knows in advance

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        check_launcher(config)
        # Jobs re-resolve hydra.sweep.dir and compose their own configs, in other processes too (joblib):
        # hand them the folder chosen here (a new one, or the resumed one) and the keys to leave out of
        # their folder names as literal overrides.
        folder = str(config.hydra.sweep.dir)
        exclude = list(
            dict.fromkeys(
                [*config.hydra.job.config.override_dirname.exclude_keys, *fixed_keys(list(config.hydra.overrides.task))]
            )
        )
        self.jobs = check_distinct_folders(config, exclude)
        launcher = OmegaConf.to_container(config.hydra.launcher, resolve=False)
        submitit = str(launcher.get("submitit_folder", "")) if isinstance(launcher, dict) else ""
        with open_dict(config):
            if submitit.endswith("/%j"):  # submitit would also make a folder named %j, empty, in every sweep
                config.hydra.launcher.submitit_folder = submitit.removesuffix("/%j")
            config.hydra.sweep.dir = folder
            config.hydra.job.config.override_dirname.exclude_keys = exclude
            config.hydra.overrides.hydra.append(f"hydra.sweep.dir='{folder}'")
            config.hydra.overrides.hydra.append(
                "hydra.job.config.override_dirname.exclude_keys=[" + ",".join(f"'{k}'" for k in exclude) + "]"
            )
        if str(config.hydra.launcher.get("_target_", "")).endswith(("JoblibLauncher", "BasicLauncher")):
            sweep_signals.install()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        runs, refused = find_runs([sweep_dir]), refusals.refused(sweep_dir)
        if stop_request.requested():
            report_stop(sweep_dir, runs, self.jobs)
        if not runs and not refused:
            return
        failed = [
            f"{r.folder.relative_to(sweep_dir)} ({r.metrics['status'].replace('_', ' ')})"
            for r in runs
            if r.metrics["status"] in (*metrics_file.STOPPED, metrics_file.RUNNING, metrics_file.ABANDONED)
        ]
        failed += [f"{r['folder']} (bad input, no folder kept)" for r in refused]
        notes = [
            f"Left out: job {r['job']} (bad input: {str(r['error']).splitlines()[0][:200].rstrip('.')}); "
            "no run folder was kept."
            for r in refused
        ]
        if any(r.comparable for r in runs):
            options = config.get("compare") or {}
            settings = (
                list(options.get("tune") or DEFAULT_TUNE),
                list(options.get("columns") or []),
                dict(options.get("margin") or {}),
            )
            result = None
            try:
                result = compare(runs, options.get("baseline"), *settings)
            except ValueError as err:  # a baseline that matches no configuration, or runs repeated
                log.error(f"compare: {err}")
                try:
                    result = compare(runs, None, *settings)
                    log.error("Compared with the default baseline instead.")
                except ValueError:
                    pass
            if result is not None:
                result.warnings.extend(notes)
                write_all(result, sweep_dir)
                text = markdown(result)
                write_text_summary(sweep_dir, text)
                print(f"\nCurves: tensorboard --logdir {sweep_dir}\nSweep summary ({sweep_dir}):\n\n{text}", flush=True)
        else:
            log.error(f"No job of {sweep_dir} gave numbers to compare. " + " ".join([*left_out_notes(runs), *notes]))
        if failed:
            log.error(f"{len(failed)} of {len(runs) + len(refused)} jobs did not finish: " + ", ".join(failed))
            sys.exit(1)


def write_text_summary(sweep_dir: Path, text: str) -> None:
    """The summary in TensorBoard's Text tab, as the run ``summary`` of the sweep folder."""
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(sweep_dir / "summary")) as writer:
        writer.add_text("sweep summary", text, global_step=0)


def report_stop(sweep_dir: Path, runs: list[Run], jobs: int | None) -> None:
    """The one message of a sweep stopped by SIGINT or SIGTERM, then exit status 130 (no summary of a part)."""
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.metrics["status"]] = counts.get(run.metrics["status"], 0) + 1
    done = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in sorted(counts.items())) or "no job started"
    skipped = f", {jobs - len(runs)} not started" if jobs is not None and jobs > len(runs) else ""
    log.error(
        f"Sweep stopped by {signal_name()}: {done}{skipped}. Interrupted jobs saved checkpoints/interrupted.ckpt. "
        f"The same command with resume=true continues the sweep in {sweep_dir}: finished jobs are skipped, the "
        "others continue from their last finished epoch (or start)."
    )
    sys.exit(EXIT_CODES["interrupted"])


def signal_name() -> str:
    import signal

    return signal.Signals(stop_request.requested() or signal.SIGINT).name
