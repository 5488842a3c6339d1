"""Checks a sweep makes before anything runs or any folder is made: launcher settings that cannot work, and jobs
that would share a folder. Each failure is one paragraph on stderr and exit status 2."""

from __future__ import annotations

import itertools
import logging
import shutil
import sys
from collections import defaultdict

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from attnexp.cli.cores import sweep_jobs
from attnexp.cli.typos import sweep_values
from attnexp.runs.folders import job_dirname

log = logging.getLogger("attnexp")


def refuse(message: str) -> None:
    """Stop the sweep before it starts (an exception here would reach the user as Hydra's traceback)."""
    log.error(f"{message} Nothing was run.")
    sys.exit(2)


def check_launcher(config: DictConfig) -> None:
    """``hydra.launcher.n_jobs`` must be a count joblib takes; ``hydra/launcher=slurm`` needs SLURM's ``sbatch``."""
    launcher = config.hydra.launcher
    target = str(launcher.get("_target_", ""))
    if target.endswith("JoblibLauncher"):
        n_jobs = launcher.get("n_jobs")
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0:
            refuse(
                f"hydra.launcher.n_jobs={n_jobs!r} is not allowed: it is how many sweep jobs run at once, a positive "
                f"integer (the default here is {sweep_jobs()}, one per core), or -1 for one per core. "
                "E.g. hydra.launcher.n_jobs=2, or hydra/launcher=basic to run the jobs one after the other."
            )
    elif target.endswith("SlurmLauncher") and shutil.which("sbatch") is None:
        refuse(
            "hydra/launcher=slurm submits each job to a SLURM cluster with sbatch, which is not on this machine's "
            "PATH. Run the sweep on the cluster's login node, or here without hydra/launcher=slurm (jobs in "
            "parallel, one per core) or with hydra/launcher=basic (one after the other)."
        )


def check_distinct_folders(config: DictConfig, exclude: list[str]) -> int | None:
    """Refuse a sweep whose jobs would write into one folder (``seed=0,0``: two runs mixed in one folder, one
    summary row); return how many jobs it has. Sweepers that choose jobs as they go (Optuna) are not checked."""
    sweeper = config.hydra.sweeper
    if not str(sweeper.get("_target_", "")).endswith("BasicSweeper"):
        return None
    parser = OverridesParser.create()
    parsed = parser.parse_overrides(list(config.hydra.overrides.task))
    values = [[f"{o.get_key_element()}={v}" for v in sweep_values(o)] for o in parsed]
    if not all(values):  # a range or glob only the sweeper expands: not checked here
        return None
    jobs = list(itertools.product(*values))  # the basic sweeper's jobs: every combination of the values, in order
    folders: dict[str, list[int]] = defaultdict(list)
    for num, job in enumerate(jobs):
        named = sorted(str(o.input_line) for o in parser.parse_overrides(list(job)) if o.key_or_group not in exclude)
        folders[job_dirname(",".join(named), num)].append(num)
    shared = {folder: nums for folder, nums in folders.items() if len(nums) > 1}
    if shared:
        listed = "; ".join(f"jobs {', '.join(f'#{n}' for n in nums)} into {folder}" for folder, nums in shared.items())
        refuse(
            f"This sweep would run several jobs into one folder ({listed}): their curves, checkpoints and records "
            "would mix, and the summary would count them once. A value is listed twice, or two values differ only "
            "by '/' and '_' (job folders write '/' as '_'). List each value once."
        )
    return len(jobs)
