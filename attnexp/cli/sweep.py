"""Hydra callback for sweeps: checks before anything runs, one folder for all jobs named by what varies, a clean stop
on SIGINT or SIGTERM, a summary at the end, failures in the exit status.

The checks come before anything runs or any folder is made: launcher settings that cannot work, and jobs that would
share a folder. Each failure is one paragraph on stderr and exit status 2.

A sweep stops cleanly on SIGINT or SIGTERM, whether the signal reaches the whole process group (Ctrl-C in a
terminal, a scheduler) or the main process alone (``kill``, ``timeout``, ``docker stop``). The main process records
the request and forwards it to the parallel launcher's worker processes; their jobs stop at their next batch boundary
and end ``interrupted`` with ``checkpoints/interrupted.ckpt``, jobs not started yet do not start, and the sweep ends
with one message and exit status 130. The workers record such signals from the moment they start
(:func:`attnexp.stop_request.in_sweep_worker`, their initializer), and end with the sweep's process (joblib shuts its
pool down at exit): no process outlives it. A second signal to the main process stops at once: the workers are killed
and their jobs' records stay ``running``, which summaries report as ``abandoned`` and ``resume=true`` continues from
the last finished epoch.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import multiprocessing
import os
import shutil
import signal
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from attnexp import stop_request
from attnexp.cli.cores import sweep_jobs
from attnexp.cli.typos import sweep_values
from attnexp.comparison.files import write_all
from attnexp.comparison.naming import find_runs
from attnexp.comparison.render import markdown
from attnexp.comparison.runs import Run, left_out_notes
from attnexp.comparison.summary import DEFAULT_TUNE, compare
from attnexp.errors import EXIT_CODES
from attnexp.runs import metrics_file, refusals
from attnexp.runs.folders import job_dirname

log = logging.getLogger("attnexp")


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
        parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
        fixed = [o.key_or_group for o in parsed if not o.is_sweep_override()]  # the same for every job: data=mnist
        exclude = list(dict.fromkeys([*config.hydra.job.config.override_dirname.exclude_keys, *fixed]))
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
            install_stop()

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
    counts = Counter(run.metrics["status"] for run in runs)
    done = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in sorted(counts.items())) or "no job started"
    skipped = f", {jobs - len(runs)} not started" if jobs is not None and jobs > len(runs) else ""
    name = signal.Signals(stop_request.requested() or signal.SIGINT).name
    log.error(
        f"Sweep stopped by {name}: {done}{skipped}. Interrupted jobs saved checkpoints/interrupted.ckpt. "
        f"The same command with resume=true continues the sweep in {sweep_dir}: finished jobs are skipped, the "
        "others continue from their last finished epoch (or start)."
    )
    sys.exit(EXIT_CODES["interrupted"])


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


def install_stop() -> None:
    """In the sweep's main process: its signal handler, and worker pools whose workers record signals from the start
    (joblib's process pool, the backend Hydra's joblib launcher asks for by name, with an initializer)."""
    from joblib import register_parallel_backend
    from joblib.parallel import LokyBackend

    register_parallel_backend("loky", functools.partial(LokyBackend, initializer=stop_request.in_sweep_worker))
    stop_request.clear()
    stop_request.install(SweepStop(at_once=True, on_first=forward))


class SweepStop(stop_request.StopOnSignal):
    """The main process's handler: the first signal is forwarded to the jobs; a second one kills them first."""

    def __call__(self, signum: int, frame: Any) -> None:
        if stop_request.requested():
            say(
                "\nStopping at once: the jobs that were running are killed; their metrics.json stays at running "
                "(reported as abandoned). The same command with resume=true continues them from their last "
                "finished epoch."
            )
            for worker in workers():
                worker.kill()
        super().__call__(signum, frame)


def forward(signum: int) -> None:
    """Pass the stop request on to every worker, and say what happens now."""
    name = signal.Signals(signum).name
    say(
        f"\n{name}: stopping the sweep. Each running job stops at its next batch boundary and saves "
        "checkpoints/interrupted.ckpt; jobs not started yet are skipped. Another Ctrl-C or SIGTERM stops at once."
    )
    for worker in workers():
        with contextlib.suppress(ProcessLookupError, TypeError):  # ended meanwhile (no pid once reaped)
            os.kill(worker.pid, signum)  # type: ignore[arg-type]


def say(text: str) -> None:
    """A line on stderr from a signal handler: written to the file descriptor, because the handler may run while the
    program is inside a write to sys.stderr, and writing to it again there raises "reentrant call"."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an object without a descriptor (a test's capture)
        print(text, file=sys.stderr, flush=True)
        return
    os.write(fd, f"{text}\n".encode())


def workers() -> list[multiprocessing.process.BaseProcess]:
    """The live worker processes of the parallel launcher (none with the basic launcher: jobs run in this process)."""
    from joblib.externals.loky.backend.process import LokyProcess

    return [p for p in multiprocessing.active_children() if isinstance(p, LokyProcess)]
