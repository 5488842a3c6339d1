"""The ``attnexp`` entrypoint: the pre-flight stage (:mod:`attnexp.cli.preflight`), then Hydra's app: build the objects
the config names, fit, test, and keep the run's record up to date. torch is imported only once a run is checked."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from attnexp import config_dir
from attnexp.cli import command, console, entrypoint, failures, preflight, ranks, report, schema, search_path
from attnexp.cli.budget import with_budget
from attnexp.cli.build import network as build_net
from attnexp.cli.hardware import cores, sweep_jobs, threads_per_job
from attnexp.cli.typos import NOTHING, quote_path
from attnexp.errors import EXIT_CODES, is_disk_full
from attnexp.runs import data as data_of_run
from attnexp.runs import folders, lock, metrics_file, trackers
from attnexp.runs.record import RunRecord

CONFIG_DIR = str(config_dir())

schema.register()
search_path.register()  # the user's configs on the search path of every command (check and predict import this)
OmegaConf.register_new_resolver("attnexp.run_folder", folders.run_folder, replace=True)
OmegaConf.register_new_resolver("attnexp.sweep_jobs", sweep_jobs, replace=True)
log = logging.getLogger("attnexp")
NO_LOG_FILE = ["hydra.job_logging.root.handlers=[console]", "~hydra.job_logging.handlers.file"]  # a rank but 0's


def train(cfg: DictConfig, record: RunRecord | None = None) -> dict[str, float]:
    """Run the experiment ``cfg`` into its record's folder (default: ``paths.output_dir``); return the final metrics."""
    import pytorch_lightning as pl
    from hydra.utils import instantiate

    from attnexp.cli.hardware import plain_cuda_check_without_driver
    from attnexp.training.callbacks.checkpoints import checkpoint_to_train_from, intact_checkpoints
    from attnexp.training.callbacks.interrupt import DeferredInterrupt
    from attnexp.training.callbacks.record import RecordKeeper
    from attnexp.training.threads import ThreadRule

    multirun = report.is_multirun()
    if record is None:
        hydra = HydraConfig.get()
        record = RunRecord.open(cfg.paths.output_dir, cfg, folders.choices_of(hydra), [], list(hydra.searchpath))
    console.configure(multirun)
    plain_cuda_check_without_driver()
    jobs = joblib_jobs()  # a sweep's jobs at once share the cores
    threads = ThreadRule(cfg.get("threads"), share=None if jobs is None else threads_per_job(jobs))
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule = data_of_run.handed_over(cfg)
    net = build_net(cfg.net, datamodule.spec)
    module: pl.LightningModule = instantiate(cfg.module, net=net, task=instantiate(cfg.task))
    last = folders.checkpoints_of(record.folder, record.fields) / "last.ckpt"
    if record.resumed and not last.exists():  # removed, cut short by a full disk: the newest intact one instead
        last = next(iter(intact_checkpoints(last.parent, besides=last)), last)
    ckpt_path = str(last) if record.resumed and last.exists() else cfg.get("ckpt_path")
    if ckpt_path:
        ckpt_path = checkpoint_to_train_from(ckpt_path, module, resumed=record.resumed)
        record.fields["resumed"][-1:] = [{**record.fields["resumed"][-1], "from": ckpt_path}] if record.resumed else []
        log.info(f"Resuming from {report.shown(Path(ckpt_path))}." if record.resumed else f"Training from {ckpt_path}.")
    # the thread rule, the record keeper (its fit time leaves out the figures drawn when fit ends), the interrupt last
    callbacks: list[pl.Callback] = [threads, RecordKeeper(record, test=bool(cfg.get("test")), announce=not multirun)]
    callbacks += [build_callback(c, record) for c in (cfg.get("callbacks") or {}).values() if c]
    if multirun:  # no progress bars in a sweep: each job prints its result line
        callbacks = [c for c in callbacks if not isinstance(c, pl.callbacks.ProgressBar)]
    callbacks.append(DeferredInterrupt())
    logger = trackers.build(cfg, record) or False  # named by the run, continuing its tracker runs (resume=true)
    quiet = {"enable_progress_bar": False} if multirun else {}
    # plain dicts and lists: Lightning reads a dict value as one (max_time={days: 1}), not a config
    trainer: pl.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=logger, _convert_="all", **quiet)
    with console.bar_safe():
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
        if cfg.get("test"):
            best = getattr(trainer.checkpoint_callback, "best_model_path", "")
            trainer.test(module, datamodule=datamodule, ckpt_path=best or None, verbose=False)
            metrics.update({k: float(v) for k, v in trainer.callback_metrics.items()})
    return metrics


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="train")
def main(cfg: DictConfig) -> Any:
    """The Hydra app behind ``attnexp``; returns ``optimized_metric`` for Hydra's sweepers. A finished run is reported
    and skipped; a failing one recorded and explained, its exit status saying why; in a sweep the other jobs go on."""
    hydra_cfg = HydraConfig.get()
    folder, multirun, metric = Path(hydra_cfg.runtime.output_dir), report.is_multirun(), cfg.get("optimized_metric")
    if multirun:
        report.link_job(folder)
    kind, found = folders.state(folder, folders.checkpoint_dir(cfg, folder))
    if kind == "finished":
        command.note_run(folder)
        for line in report.finished(folder, found):
            log.info(line)
        return found.get(metric or "val/acc_best")
    if not ranks.is_global_zero():  # another rank of a data-parallel run: it trains beside rank 0, which writes
        for name in ("", "attnexp"):  # and prints the run; this one says only its errors, not the warnings too
            logging.getLogger(name).setLevel(logging.ERROR)
    with contextlib.ExitStack() as held:
        if ranks.is_global_zero():
            try:  # one writer per run: a second start of it now (another command, a sweep started twice) stops here
                held.enter_context(lock.holding(folder))
            except lock.Busy as busy:
                return refused(folder, f"{busy} (wait for it to end, or stop it)", multirun)
            except OSError as err:
                if not is_disk_full(err):
                    raise
                return no_room(folder, multirun)
            kind, found = folders.state(folder, folders.checkpoint_dir(cfg, folder))  # again, under the lock
            why = folders.refusal(folder, kind, found, bool(cfg.get("resume")))
            if kind == "finished" or why:
                return refused(folder, why, multirun, found, metric)
        return trained(cfg, folder, kind, found)


def trained(cfg: DictConfig, folder: Path, kind: str, found: dict[str, Any]) -> Any:
    """Train the run of ``folder`` (what it holds: ``kind``, its record ``found``), recording it; its
    ``optimized_metric``."""
    hydra_cfg, multirun, metric = HydraConfig.get(), report.is_multirun(), cfg.get("optimized_metric")
    command.note_run(folder)
    if kind == "restart":
        log.info(report.restarted(folder, found))
    overrides = [str(o) for o in hydra_cfg.overrides.task]
    record = RunRecord.open(folder, cfg, folders.choices_of(hydra_cfg), overrides, list(hydra_cfg.searchpath))
    if multirun:
        record.fields["parallel_jobs"] = joblib_jobs()
    else:
        log.info(f"Run folder: {report.shown(folder)}")
        if cfg.get("resume") and not record.resumed:
            log.info(report.nothing_to_resume(folder, record.fields["code"]))
    try:
        if ranks.is_global_zero() and not metrics_file.path(folder).exists():  # the record's first blocks before
            record.write(status=metrics_file.RUNNING)  # anything else: a full disk later writes the failure over them
        metrics = train(cfg, record)
        for line in report.result_line(folder) if multirun else report.run_report(folder):
            log.log(logging.WARNING if line.startswith(report.WARNED) else logging.INFO, line)
    except BaseException as err:
        status = failures.stopped(cfg, err, record)
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        if multirun:
            return float("nan")  # the sweep goes on; its end reports this job
        raise SystemExit(EXIT_CODES[status]) from None
    if record.fields.get("status") == metrics_file.INVALID and not multirun:  # its numbers kept, said to be none
        raise SystemExit(EXIT_CODES[metrics_file.INVALID])
    return metrics.get(metric or "val/acc_best")


def refused(
    folder: Path, why: str | None, multirun: bool, found: dict[str, Any] | None = None, metric: str | None = None
) -> Any:
    """A start of a run that another process trains, or has finished, since the pre-flight stage looked: a sweep's
    job is skipped, saying so; a single run is bad input (exit status 2). Nothing of this start reaches the folder's
    train.log."""
    console.detach_files(folder)
    if why is None:  # finished meanwhile
        command.note_run(folder)
        for line in report.finished(folder, found or {}):
            log.info(line)
        return (found or {}).get(metric or "val/acc_best")
    if multirun:
        log.warning(f"Job {report.job_name()} skipped: {why}.")
        return float("nan")
    print(f"Bad input: {why}. {NOTHING}", file=sys.stderr)
    raise SystemExit(EXIT_CODES["bad_input"])


def no_room(folder: Path, multirun: bool) -> Any:
    """A start that found the disk full before its first record: said on the console (there is no room for a record
    or train.log), the folder left with nothing of this start in it. A sweep goes on with its other jobs."""
    console.detach_files(folder)
    said = report.failure(metrics_file.FAILED, f"{failures.disk_full(folder)} {failures.UNRECORDED}", None)
    for made in (folder / lock.FILE, folder / "train.log"):
        if made.is_file() and made.stat().st_size == 0:
            made.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()  # made by this start, and empty
    log.error(said)
    if multirun:
        return float("nan")
    raise SystemExit(EXIT_CODES[metrics_file.FAILED])


def build_callback(node: DictConfig, record: RunRecord) -> Any:
    """A callback of the config; one that takes ``record`` (the run's :class:`RunRecord`) is handed it."""
    from hydra.utils import get_object, instantiate

    target = node.get("_target_")
    if target and "record" in inspect.signature(get_object(target)).parameters:
        return instantiate(node, _partial_=True)(record=record)  # as an object: instantiate would make it a config
    return instantiate(node)


def joblib_jobs() -> int | None:
    """In a sweep run by the joblib launcher, how many jobs run at once; else None."""
    launcher = HydraConfig.get().launcher
    if not report.is_multirun() or not str(launcher.get("_target_", "")).endswith("JoblibLauncher"):
        return None
    n_jobs = int(launcher.n_jobs)
    return n_jobs if n_jobs > 0 else max(1, cores() + 1 + n_jobs)  # joblib's count for -1 (every core), -2, ...


def cli() -> None:
    """Console script ``attnexp``: the pre-flight stage (bad input: status 2, no folder), then :func:`main`."""

    def check() -> None:
        args = with_budget(quote_path(a, ("ckpt_path", "data.path")) for a in sys.argv[1:])
        if ranks.is_global_zero():  # another rank of a data-parallel run was checked by rank 0, and writes no log
            with console.quiet(logging.ERROR, "attnexp"):
                args += preflight.sweep_overrides(args, preflight.check(args, CONFIG_DIR))
        else:
            args += NO_LOG_FILE
        ranks.follow_launcher()
        sys.argv[1:] = args

    entrypoint.run("attnexp", check, main, prefix="Bad input", stopped=report.STOPPED)


if __name__ == "__main__":
    cli()
