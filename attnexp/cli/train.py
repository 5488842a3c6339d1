"""The ``attnexp`` entrypoint: compose the config, check it, build the objects, fit, test.

torch, Lightning and the project's modules are imported only once a run is about to be built, so
``--help``, ``--cfg job`` and a bad value answer at once.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from attnexp import stop_request
from attnexp.cli import report, search_path
from attnexp.cli.cores import sweep_jobs, threads_per_job
from attnexp.cli.failures import explain_mixer_failure, keep_traceback, log_file
from attnexp.cli.fast_exit import run_then_exit
from attnexp.cli.memory import explain_out_of_memory, is_out_of_memory
from attnexp.cli.validate import check_config, check_environment, check_override_syntax, quote_path, unaccepted
from attnexp.errors import EXIT_CODES, AttnexpError, explain, is_bad_input, root_cause
from attnexp.runs import metrics_file
from attnexp.runs.folders import FolderTaken, check_new_folder, job_dirname, output_dir, resume_point, run_dirname

CONFIG_DIR = str(search_path.config_dir())
search_path.register()  # the user's configs and modules (see attnexp.cli.search_path)
OmegaConf.register_new_resolver("attnexp.output_dir", output_dir, replace=True)
OmegaConf.register_new_resolver("attnexp.job_dirname", job_dirname, replace=True)
OmegaConf.register_new_resolver("attnexp.run_dirname", run_dirname, replace=True)
OmegaConf.register_new_resolver("attnexp.sweep_jobs", sweep_jobs, replace=True)
log = logging.getLogger("attnexp")


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


def train(cfg: DictConfig) -> dict[str, float]:
    """Run one experiment described by ``cfg``; return the final metrics."""
    check_config(cfg)
    output_dir = Path(cfg.paths.output_dir)
    ckpt_path, resumed = cfg.get("ckpt_path"), False
    if cfg.get("resume"):
        action, last = resume_point(output_dir)
        if action == "done":
            log.info(f"{output_dir} already finished (metrics.json status ok): skipped.")
            return metrics_file.read(output_dir)
        ckpt_path, resumed = last or ckpt_path, last is not None
        log.info(f"Resuming from {ckpt_path}." if ckpt_path else "Nothing to resume: starting fresh.")
    else:
        check_new_folder(output_dir)

    import pytorch_lightning as pl
    from hydra.utils import instantiate

    from attnexp.callbacks.checkpoints import checkpoint_to_train_from
    from attnexp.callbacks.interrupt import DeferredInterrupt
    from attnexp.cli import console
    from attnexp.cli.cuda_check import plain_cuda_check_without_driver

    multirun = is_multirun()
    console.configure(multirun)
    check_environment(cfg)
    plain_cuda_check_without_driver()
    threads = cfg.get("threads") or parallel_threads()
    if threads:
        import torch

        torch.set_num_threads(threads)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule: pl.LightningDataModule = instantiate(cfg.data)
    net = build_net(cfg.net, datamodule.spec)
    module: pl.LightningModule = instantiate(cfg.module, net=net, task=instantiate(cfg.task))
    if ckpt_path:
        ckpt_path = checkpoint_to_train_from(ckpt_path, module, resumed)
    callbacks: list[pl.Callback] = [instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c]
    if multirun:  # no progress bars in a sweep: each job prints its result line
        callbacks = [c for c in callbacks if not isinstance(c, pl.callbacks.ProgressBar)]
    callbacks.append(DeferredInterrupt())
    logger = instantiate(cfg.logger) if cfg.get("logger") else False
    quiet = {"enable_progress_bar": False} if multirun else {}
    trainer: pl.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=logger, enable_model_summary=False, **quiet)
    logging.getLogger("pytorch_lightning").info(console.model_summary(module))  # train.log only
    if not multirun:
        log.info(report.describe(cfg, module, trainer))
    trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    if cfg.get("test"):
        best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
        trainer.test(module, datamodule=datamodule, ckpt_path=best or None, verbose=False)
        metrics.update({k: float(v) for k, v in trainer.callback_metrics.items()})
    return metrics


def record_failure(cfg: DictConfig, err: BaseException) -> str:
    """Make sure the run's metrics.json says how it ended; return that status. A record that another process wrote
    (the run this one was to resume, a run already in the folder) is left as it was: nothing of this run is in it."""
    output_dir = Path(cfg.paths.output_dir)
    found = metrics_file.read(output_dir)
    if isinstance(err, (KeyboardInterrupt, SystemExit)):
        status, error = metrics_file.INTERRUPTED, report.INTERRUPTED
    else:
        status, error = (metrics_file.BAD_INPUT if is_bad_input(err) else metrics_file.FAILED), explain(err)
    if found.get("status") == metrics_file.DIVERGED:
        status = metrics_file.DIVERGED
    if found.get("pid", os.getpid()) == os.getpid() and not isinstance(root_cause(err), FolderTaken):
        written = {**metrics_file.header(HydraConfig.get().runtime.choices, cfg.get("seed")), **found, "status": status, "error": error}
        metrics_file.write(output_dir, written)
    return status


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="train")
def main(cfg: DictConfig) -> Any:
    """The Hydra app behind ``attnexp`` (:func:`cli`); returns ``optimized_metric`` (default ``val/acc_best``) for Hydra sweepers.

    A failing run is recorded in its metrics.json and explained in one
    paragraph; the exit status says why (see ``EXIT_CODES``). In a multirun the
    other jobs still run; once the sweep is asked to stop, jobs not started yet do not start.
    """
    output_dir, multirun = Path(cfg.paths.output_dir), is_multirun()
    if multirun and stop_request.requested():
        return float("nan")  # no record: resume=true starts this job
    if not multirun:
        log.info(f"Run folder: {report.shown(output_dir)}")
    try:
        metrics = train(cfg)
        for line in (report.result_line(output_dir) if multirun else report.run_report(output_dir)):
            log.log(logging.WARNING if line.startswith(report.WARNED) else logging.INFO, line)
        return metrics.get(cfg.get("optimized_metric") or "val/acc_best")
    except BaseException as err:
        raised = err
        err = explain_out_of_memory(cfg, err, meta_parameter_count(cfg)) if is_out_of_memory(err) else explain_mixer_failure(err)
        status = record_failure(cfg, err)
        if multirun and status == metrics_file.INTERRUPTED:
            log.info(report.result_line(output_dir)[0])
        else:
            log.error(report.failure(status, err, log_file() if status == metrics_file.FAILED else None))
        if status != metrics_file.INTERRUPTED:
            keep_traceback(raised)
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        if multirun:
            return float("nan")  # the sweep goes on (or stops, when asked to); its end reports this job
        raise SystemExit(EXIT_CODES[status]) from None


def meta_parameter_count(cfg: DictConfig) -> int | None:
    """The network's parameters, counted on PyTorch's meta device (nothing is allocated); None when it cannot be built."""
    try:
        import torch
        from hydra.utils import instantiate

        with torch.device("meta"):
            net = build_net(cfg.net, instantiate(cfg.data).spec)
        return sum(p.numel() for p in net.parameters())
    except Exception:
        return None


def is_multirun() -> bool:
    return HydraConfig.get().mode == RunMode.MULTIRUN


def parallel_threads() -> int | None:
    """In a sweep run by the joblib launcher, each job's share of the cores; else None (torch's default)."""
    if not is_multirun():
        return None
    launcher = HydraConfig.get().launcher
    return threads_per_job(int(launcher.n_jobs)) if str(launcher.get("_target_", "")).endswith("JoblibLauncher") else None


def cli() -> None:
    """Console script ``attnexp``: :func:`main`, then a quick exit (see :mod:`attnexp.cli.fast_exit`)."""
    sys.argv[1:] = [quote_path(a, ("ckpt_path", "data.path")) for a in sys.argv[1:]]
    try:
        check_override_syntax(sys.argv[1:])
    except AttnexpError as err:
        print(err, file=sys.stderr)
        raise SystemExit(EXIT_CODES["bad_input"]) from None
    run_then_exit(main)


if __name__ == "__main__":
    cli()
