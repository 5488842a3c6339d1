"""The pre-flight stage's part for what a run builds last: each job's ``${hydra:...}`` values resolved as Hydra will
resolve them in the job (:func:`as_in_the_job`, :func:`check_resolved`), and its loggers built as the run will build
them, quietly (:func:`check_loggers`): a logger Lightning or its tracker refuses, or whose package is missing, is bad
input said in one paragraph before any run folder exists. The MLflow stores they name are made here, once, before a
sweep's jobs start (:func:`attnexp.runs.trackers.prepare`)."""

from __future__ import annotations

import copy
import logging
import tempfile
import warnings
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from attnexp.cli import console, typos
from attnexp.cli.typos import NOTHING
from attnexp.errors import AttnexpError, root_cause
from attnexp.runs import trackers


def as_in_the_job(cfg: DictConfig, output_dir: str | None = None) -> DictConfig:
    """A copy of the job's config that Hydra's ``${hydra:...}`` resolver reads as the job's own (``HydraConfig`` set
    to it), its output folder ``output_dir`` where given."""
    from hydra.core.hydra_config import HydraConfig

    job = copy.deepcopy(cfg)
    if output_dir is not None:
        job.hydra.runtime.output_dir = output_dir
    HydraConfig.instance().set_config(job)
    return job


def check_resolved(jobs: list[DictConfig]) -> None:
    """Every value of every job resolves as it will in the job (its ``${hydra:...}`` among them; its output folder,
    which its identity names, is not looked up yet); Hydra's config is left set to the first job's."""
    for cfg in reversed(jobs):
        job = as_in_the_job(cfg, str(Path(cfg.paths.log_dir, "runs", "run")))
        for key in (str(k) for k in job if k != "hydra"):
            try:
                OmegaConf.to_container(job[key], resolve=True) if isinstance(job[key], DictConfig) else job[key]
            except OmegaConfBaseException as err:
                cause = " ".join(str(root_cause(err)).split("\n")[0].split())
                raise AttnexpError(
                    f"A value under {key} cannot be resolved: {type(root_cause(err)).__name__}: {cause}. "
                    "${hydra:KEY} reads the job's Hydra config (attnexp --cfg hydra shows its keys, e.g. "
                    "${hydra:runtime.output_dir}, ${hydra:job.override_dirname}); fix the key or the value. " + NOTHING
                ) from None


def check_loggers(jobs: list[DictConfig], prepare: bool = False) -> None:
    """Build each job's loggers as the run will, quietly, in a throwaway folder instead of the run's (an MLflow
    logger's store only named); ``prepare``: make the MLflow stores and experiments they name instead, once, before a
    sweep's jobs start."""
    from hydra.core.hydra_config import HydraConfig

    seen: set[str] = set()
    before = HydraConfig.instance().cfg  # the folder checks after read the job's own, not the throwaway folder
    try:
        built(jobs, prepare, seen)
    finally:
        if before is not None:
            HydraConfig.instance().set_config(cast(DictConfig, before))  # its "hydra" node, as set_config keeps it


def built(jobs: list[DictConfig], prepare: bool, seen: set[str]) -> None:
    """:func:`check_loggers`' work, Hydra's config set to each job's in turn."""
    from hydra.utils import instantiate

    for cfg in jobs:
        with tempfile.TemporaryDirectory() as scratch:
            job = as_in_the_job(cfg, str(Path(scratch, "run")))
            for name, node in trackers.nodes(job).items():
                text = str(OmegaConf.to_container(node, resolve=False))
                if text in seen:
                    continue
                seen.add(text)
                given: dict[str, Any] = {"offline": True} if str(node.get("_target_")) == trackers.WANDB else {}
                if str(node.get("_target_")) == trackers.MLFLOW and not str(node.get("tracking_uri")).startswith(
                    "http"
                ):
                    given = {
                        "tracking_uri": "http://127.0.0.1:9"
                    }  # a store's client would make it: a server's connects later
                with warnings.catch_warnings(), console.quiet(logging.ERROR, *console.LIBRARIES, "mlflow", "alembic"):
                    warnings.simplefilter("ignore")
                    try:
                        if prepare:
                            trackers.prepare(job)
                        else:
                            instantiate(node, **given)
                    except Exception as err:
                        raise AttnexpError(refused(cfg, name, node, root_cause(err))) from None


def refused(cfg: DictConfig, name: str, node: DictConfig, err: BaseException) -> str:
    """The paragraph for a logger that cannot be built: a missing tracker's extra, an option its class does not take,
    or the tracker's own reason."""
    where = "logger" if name == "logger" else f"logger.{name}"
    target = node.get("_target_")
    text = " ".join(str(err).split())
    missing = [extra for module, extra in trackers.EXTRAS.items() if module in text.lower()]
    if isinstance(err, ImportError):
        install = f"pip install 'attnexp[{missing[0]}]'" if missing else "the install its message names"
        return (
            f"{where} is {target}, which needs a package that is not installed here ({text.rstrip('.')}). Install "
            f"it ({install}), or choose another logger: logger=tensorboard, csv or none. {NOTHING}"
        )
    if isinstance(err, TypeError):
        told = typos.misspelt_option(cfg, err)
        if told:
            return told
    return (
        f"{where} ({target}) cannot be built: {type(err).__name__}: {text.rstrip('.')}. Its keys are the arguments of "
        f"{target} (attnexp --cfg job shows the ones the config sets): fix the value, or choose another logger. "
        f"{NOTHING}"
    )
