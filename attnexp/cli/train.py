"""The ``attnexp`` entrypoint: compose the config, check it, build the objects, fit, test.

torch, Lightning and the project's modules are imported only once a run is about to be built, so
``--help``, ``--cfg job`` and a bad value answer at once.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from attnexp import stop_request
from attnexp.cli import console, failures, report, search_path
from attnexp.cli.cores import cores, sweep_jobs, threads_per_job
from attnexp.cli.fast_exit import run_then_exit
from attnexp.cli.typos import check_composition, check_words, is_sweep, overrides_and_words
from attnexp.cli.validate import check_config, check_environment, check_override_syntax, quote_path, unaccepted
from attnexp.errors import EXIT_CODES, AttnexpError
from attnexp.runs import metrics_file
from attnexp.runs.fingerprint import Settings, settings_of
from attnexp.runs.folders import (
    check_new_folder,
    check_writable,
    job_dirname,
    resume_point,
    resumed_folder,
    run_dirname,
)
from attnexp.runs.provenance import mixer_sources
from attnexp.runs.record import RunRecord
from attnexp.runs.resume import check_same_settings, check_same_sources, fresh_start

CONFIG_DIR = str(search_path.config_dir())
search_path.register()  # the user's configs and modules (see attnexp.cli.search_path)
OmegaConf.register_new_resolver("attnexp.job_dirname", job_dirname, replace=True)
OmegaConf.register_new_resolver("attnexp.run_dirname", run_dirname, replace=True)
OmegaConf.register_new_resolver("attnexp.sweep_jobs", sweep_jobs, replace=True)
log = logging.getLogger("attnexp")
NOT_RUN = {"-c", "--cfg", "-i", "--info", "-p", "--package"}  # flags that print instead of running


def build_net(net_cfg: DictConfig, spec: dict[str, Any]) -> Any:
    """Instantiate the network from its config and the data's shape facts (``datamodule.spec``)."""
    from hydra.utils import instantiate

    unknown = unaccepted(net_cfg._target_, spec)
    if unknown:
        fits = [f"net={name}" for name, target in network_options() if not unaccepted(target, spec)]
        raise AttnexpError(
            f"The network {net_cfg._target_} does not fit this data: the data describes itself by {sorted(spec)}, "
            f"and the network takes no {unknown}. Drop the net= override (each data config picks a network that "
            f"fits it) or pick one that does: {', '.join(fits) or 'none of the net options'}."
        )
    return instantiate(net_cfg, **spec)


def network_options() -> list[tuple[str, str]]:
    """Every option of the ``net`` config group, with the class it builds."""
    return [(p.stem, OmegaConf.load(p)._target_) for p in sorted((Path(CONFIG_DIR) / "net").glob("*.yaml"))]


def train(cfg: DictConfig, record: RunRecord | None = None) -> dict[str, float]:
    """Run one experiment described by ``cfg`` (``record``: its record, opened by :func:`main`); return the final
    metrics."""
    check_config(cfg)
    output_dir, multirun = Path(cfg.paths.output_dir), report.is_multirun()
    record = record or RunRecord.open(output_dir, run_settings(cfg))
    ckpt_path, resumed = cfg.get("ckpt_path"), False
    if cfg.get("resume"):
        found = metrics_file.read(output_dir)
        check_same_settings(output_dir, record.settings.config)
        action, last = resume_point(output_dir)
        if action == "done":
            log.info(f"{output_dir} already finished (metrics.json status ok): skipped.")
            return found
        ckpt_path, resumed = last or ckpt_path, last is not None
        fresh = (
            "Nothing to resume: starting fresh."
            if found or multirun
            else fresh_start(Path(cfg.paths.log_dir) / "runs", record.settings.config)
        )
        log.info(f"Resuming from {ckpt_path}." if ckpt_path else fresh)
    else:
        check_new_folder(output_dir)

    import pytorch_lightning as pl
    from hydra.utils import instantiate

    from attnexp.callbacks.checkpoints import checkpoint_to_train_from
    from attnexp.callbacks.interrupt import DeferredInterrupt
    from attnexp.callbacks.record import RecordKeeper
    from attnexp.cli.cuda_check import plain_cuda_check_without_driver
    from attnexp.threads import ThreadRule

    console.configure(multirun)
    check_environment(cfg)
    plain_cuda_check_without_driver()
    threads = ThreadRule(cfg.get("threads"), share=parallel_threads())  # torch's threads (attnexp/threads.py)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule = instantiate(cfg.data)  # a data module of attnexp.data: it describes itself by its spec
    net = build_net(cfg.net, datamodule.spec)
    if resumed:
        check_same_sources(output_dir, mixer_sources(net))
    module: pl.LightningModule = instantiate(cfg.module, net=net, task=instantiate(cfg.task))
    if ckpt_path:
        ckpt_path = checkpoint_to_train_from(ckpt_path, module, resumed)
    # the thread rule, the record keeper (its fit time leaves out the figures drawn when fit ends), the interrupt last
    callbacks: list[pl.Callback] = [threads, RecordKeeper(record, test=bool(cfg.get("test")), announce=not multirun)]
    callbacks += [build_callback(c, record) for c in (cfg.get("callbacks") or {}).values() if c]
    if multirun:  # no progress bars in a sweep: each job prints its result line
        callbacks = [c for c in callbacks if not isinstance(c, pl.callbacks.ProgressBar)]
    callbacks.append(DeferredInterrupt())
    logger = instantiate(cfg.logger) if cfg.get("logger") else False
    quiet = {"enable_progress_bar": False} if multirun else {}
    trainer: pl.Trainer = instantiate(
        cfg.trainer, callbacks=callbacks, logger=logger, enable_model_summary=False, **quiet
    )
    logging.getLogger("pytorch_lightning").info(console.model_summary(module))  # train.log only
    trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    if cfg.get("test"):
        best = getattr(trainer.checkpoint_callback, "best_model_path", "")
        trainer.test(module, datamodule=datamodule, ckpt_path=best or None, verbose=False)
        metrics.update({k: float(v) for k, v in trainer.callback_metrics.items()})
    return metrics


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="train")
def main(cfg: DictConfig) -> Any:
    """The Hydra app behind ``attnexp`` (:func:`cli`); returns ``optimized_metric`` (default ``val/acc_best``) for
    Hydra sweepers.

    A failing run is recorded in its metrics.json and explained in one
    paragraph; the exit status says why (see ``EXIT_CODES``). In a multirun the
    other jobs still run; once the sweep is asked to stop, jobs not started yet do not start.
    """
    output_dir, multirun = Path(cfg.paths.output_dir), report.is_multirun()
    if multirun and stop_request.requested():
        return float("nan")  # no record: resume=true starts this job
    if not multirun:
        log.info(f"Run folder: {report.shown(output_dir)}")
    else:
        failures.forget_refusal()
    record = RunRecord.open(output_dir, run_settings(cfg))
    try:
        metrics = train(cfg, record)
        for line in report.result_line(output_dir) if multirun else report.run_report(output_dir):
            log.log(logging.WARNING if line.startswith(report.WARNED) else logging.INFO, line)
        return metrics.get(cfg.get("optimized_metric") or "val/acc_best")
    except BaseException as err:
        raised, err = err, failures.explained(cfg, err, meta_parameter_count)
        status, kept = failures.record_failure(cfg, err, record)
        if multirun and status == metrics_file.INTERRUPTED:
            log.info(report.result_line(output_dir)[0])
        else:
            log.error(report.failure(status, err, kept, failures.log_file() if status == metrics_file.FAILED else None))
        if status != metrics_file.INTERRUPTED and kept:
            failures.keep_traceback(raised)
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        if multirun:
            return float("nan")  # the sweep goes on (or stops, when asked to); its end reports this job
        raise SystemExit(EXIT_CODES[status]) from None


def meta_parameter_count(cfg: DictConfig) -> int | None:
    """The network's parameters, counted on PyTorch's meta device (nothing is allocated); None when it cannot be
    built."""
    try:
        import torch
        from hydra.utils import instantiate

        with torch.device("meta"):
            net = build_net(cfg.net, instantiate(cfg.data).spec)
        return sum(p.numel() for p in net.parameters())
    except Exception:
        return None


def build_callback(node: DictConfig, record: RunRecord) -> Any:
    """A callback of the config; one that takes ``record`` (the run's :class:`RunRecord`) is handed it."""
    from hydra.utils import get_object, instantiate

    target = node.get("_target_")
    if target and "record" in inspect.signature(get_object(target)).parameters:
        return instantiate(node, _partial_=True)(record=record)  # as an object: instantiate would make it a config
    return instantiate(node)


def run_settings(cfg: DictConfig) -> Settings:
    """The run's settings as its records keep them (:class:`Settings`): the options chosen, the resolved config, the
    overrides that name it and, in a sweep of jobs side by side, how many share the cores."""
    hydra = HydraConfig.get()
    excluded = set(hydra.job.config.override_dirname.exclude_keys)
    overrides = [str(o) for o in hydra.overrides.task if str(o).lstrip("+~").partition("=")[0] not in excluded]
    jobs = joblib_jobs()
    return settings_of(cfg, hydra.runtime.choices, overrides, jobs if jobs and jobs > 1 else None)


def joblib_jobs() -> int | None:
    """In a sweep run by the joblib launcher, how many jobs run at once; else None."""
    launcher = HydraConfig.get().launcher
    if not report.is_multirun() or not str(launcher.get("_target_", "")).endswith("JoblibLauncher"):
        return None
    n_jobs = int(launcher.n_jobs)
    return n_jobs if n_jobs > 0 else max(1, cores() + 1 + n_jobs)  # joblib's count for -1 (every core), -2, ...


def parallel_threads() -> int | None:
    """In a sweep run by the joblib launcher, each job's share of the cores; else None (torch's default)."""
    jobs = joblib_jobs()
    return None if jobs is None else threads_per_job(jobs)


def folder_overrides(cfg: DictConfig, args: list[str]) -> list[str]:
    """Where the run or sweep of the command line writes, found before Hydra makes a folder: its root must be
    writable; with ``resume=true`` it continues the folder :func:`resumed_folder` finds (unless one is named)."""
    if NOT_RUN & {a.split("=", 1)[0] for a in args}:
        return []
    sweep = is_sweep(args, cfg)
    check_writable(Path(cfg.paths.log_dir) / ("multirun" if sweep else "runs"))
    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    overrides, _ = overrides_and_words(args)
    if not cfg.get("resume") or any(o.startswith(f"{key}=") for o in overrides):
        return []
    found = resumed_folder(cfg, overrides if sweep else list(cfg.hydra.overrides.task), sweep)
    return [quote_path(f"{key}={found}", (key,))] if found else []


def cli() -> None:
    """Console script ``attnexp``: :func:`main`, then a quick exit (see :mod:`attnexp.cli.fast_exit`)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads: no spinning beside a busy core (speed.md)
    args = [quote_path(a, ("ckpt_path", "data.path")) for a in sys.argv[1:]]
    try:
        check_words(args)
        check_override_syntax(args)
        with console.quiet(logging.ERROR, "attnexp"):  # the warnings composing logs: the run that follows logs them
            cfg = check_composition(args, CONFIG_DIR)
        if cfg is not None:
            args += folder_overrides(cfg, args)
    except AttnexpError as err:
        print(err, file=sys.stderr)
        raise SystemExit(EXIT_CODES["bad_input"]) from None
    sys.argv[1:] = args
    run_then_exit(main)


if __name__ == "__main__":
    cli()
