"""A run in the trackers a lab already reads (Lightning's ``MLFlowLogger`` and ``WandbLogger``, and every other
logger the ``logger`` group names): the loggers built with the run's folder as its name and what its record knows as
parameters and tags, the record's files as artifacts when it ends, and a sweep's comparison beside its runs. The
record (``metrics.json``) keeps each tracker's run id under ``trackers``, so a resumed run continues the same tracker
run and a comparison made later finds them. mlflow and wandb are imported only where a config names them."""

from __future__ import annotations

import logging
import netrc
import os
import shlex
import sys
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from attnexp.runs import metrics_file

log = logging.getLogger("attnexp")
MLFLOW, WANDB = "pytorch_lightning.loggers.MLFlowLogger", "pytorch_lightning.loggers.WandbLogger"
EXTRAS = {"mlflow": "mlflow", "wandb": "wandb"}  # the module a logger needs -> attnexp's extra that installs it
KILLED = (metrics_file.INTERRUPTED, metrics_file.ABANDONED)


def nodes(cfg: DictConfig) -> dict[str, DictConfig]:
    """The loggers of ``cfg.logger`` by name: a node per logger (``logger=[tensorboard,mlflow]``), or one logger
    written as the node itself (``logger=none +logger._target_=...``)."""
    node = cfg.get("logger")
    if not isinstance(node, DictConfig) or not node:
        return {}
    if "_target_" in node:
        return {"logger": node}
    return {str(k): v for k, v in node.items() if isinstance(v, DictConfig) and "_target_" in v}


def wandb_offline() -> bool:
    """W&B runs offline unless the user logged in (``wandb login``'s netrc entry, ``WANDB_API_KEY``) or set
    ``WANDB_MODE``."""
    if os.environ.get("WANDB_MODE") or os.environ.get("WANDB_API_KEY"):
        return False
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is None
    except (OSError, netrc.NetrcParseError):
        return True


def run_name(folder: Path) -> str:
    """A run's name in a tracker: its folder under the output root (``dot_digits_e7cf4903/seed=0``)."""
    return f"{folder.parent.name}/{folder.name}"


def tags(fields: Mapping[str, Any]) -> dict[str, str]:
    """What a tracker can filter a run by: the identity, the code and data hashes, the status, the mixer's kind of
    weights, attnexp's commit, the folder."""
    found = {
        "attnexp.identity": fields.get("identity"),
        "attnexp.code": (fields.get("code") or {}).get("id"),
        "attnexp.dataset": (fields.get("dataset") or {}).get("id"),
        "attnexp.status": fields.get("status"),
        "attnexp.weight_kind": fields.get("weight_kind"),
        "attnexp.commit": (fields.get("software") or {}).get("commit"),
        "attnexp.folder": str(fields.get("folder", "")),
        **{f"attnexp.{k}": fields.get(k) for k in ("mixer", "data", "net", "task", "seed")},
    }
    return {k: str(v) for k, v in found.items() if v not in (None, "")}


def params(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A run's parameters: its resolved settings by dotted key and its config choices (``choice/model``)."""
    from attnexp.runs.settings import leaves

    settings = {k: v for k, v in leaves(fields.get("config") or {}) if not isinstance(v, (dict, list)) or v}
    return {**settings, **{f"choice/{k}": v for k, v in (fields.get("choices") or {}).items()}}


def build(cfg: DictConfig, record: Any) -> list[Any]:
    """The run's loggers, each built from its node by Hydra's ``instantiate`` with what identifies the run: its name,
    tags and parameters; the tracker run its record names when it continues (``resume=true``). Each one's run id goes
    into the record (``trackers``)."""
    from hydra.utils import instantiate

    fields = {**record.fields, "folder": record.folder}
    known = record.fields.setdefault("trackers", {})
    built = []
    for name, node in nodes(cfg).items():
        target, before = str(node.get("_target_")), known.get(name) or {}
        if target == MLFLOW:
            uri = absolute(node.get("tracking_uri") or tracking_uri())  # MLflow's own default, not Lightning's ./mlruns
            extra = {"run_name": node.get("run_name") or run_name(record.folder), "run_id": before.get("run_id")}
            extra["tracking_uri"] = uri
            logger = instantiate(node, **extra, tags={**tags(fields), **(node.get("tags") or {})})
            if not before:  # a continued run has its parameters
                logger.log_hyperparams(params(fields))
            known[name] = {"kind": "mlflow", "tracking_uri": uri, "experiment_id": logger.experiment_id}
            known[name]["run_id"] = logger.run_id
        elif target == WANDB:
            logger = instantiate(node, **wandb_arguments(node, record, before))
            run = logger.experiment
            run.config.update(params(fields), allow_val_change=True)
            known[name] = {"kind": "wandb", "id": run.id, "project": run.project, "dir": str(Path(run.dir).parent)}
            known[name] |= {"offline": bool(run.offline), "save_dir": str(logger.save_dir), "group": run.group or ""}
            known[name]["name"] = run.name
        else:
            logger = instantiate(node)
            kind = type(logger).__name__.removesuffix("Logger").lower()  # tensorboard, csv, or the class's own
            known[name] = {"kind": kind, "dir": str(getattr(logger, "log_dir", None) or record.folder)}
        built.append(logger)
    return built


def wandb_arguments(node: DictConfig, record: Any, before: Mapping[str, Any]) -> dict[str, Any]:
    """What ``WandbLogger`` is given besides its node: the run's name, an id kept in the record (a resumed run
    continues it), the sweep's group, the tags, offline unless the user is logged in."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    fields, hydra = {**record.fields, "folder": record.folder}, HydraConfig.get() if HydraConfig.initialized() else None
    group = node.get("group") or (str(hydra.sweep.dir) if hydra and hydra.mode == RunMode.MULTIRUN else None)
    found = {"name": node.get("name") or run_name(record.folder), "id": before.get("id") or uuid.uuid4().hex[:12]}
    found |= {"resume": "allow", "tags": wandb_tags(tags(fields)), "reinit": "create_new"}
    found |= {"offline": wandb_offline() if node.get("offline") is None else bool(node.offline)}
    return found | ({"group": group} if group else {})


def wandb_tags(found: Mapping[str, str]) -> list[str]:
    """Tags as W&B takes them: ``key:value`` strings of at most 64 characters (``identity:e7cf4903...``,
    ``verdict/test/acc:better``); the folder aside, as it is the run's name."""
    return [f"{k.removeprefix('attnexp.')}:{v}"[:64] for k, v in found.items() if k != "attnexp.folder"]


def wandb_exit_code(status: Any) -> int:
    """The exit code a W&B run ends with: 130 for Ctrl-C or SIGTERM, 1 for another stop, 0 for a run that ended."""
    return 130 if status in KILLED else 1 if status in metrics_file.STOPPED else 0


def absolute(uri: str | None) -> str | None:
    """A SQLite store's URI with its file's absolute path: MLflow keeps one store per URI in a process, and a
    relative one names another file from another working folder."""
    if uri and uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return f"sqlite:///{Path(uri.removeprefix('sqlite:///')).resolve()}"
    return uri


def tracking_uri() -> str:
    """MLflow's tracking URI where the config names none: ``MLFLOW_TRACKING_URI``, else MLflow 3's default store,
    ``sqlite:///mlflow.db`` in the working folder (read here each time: MLflow keeps the first it resolved in a
    process)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"


def ended(loggers: Iterable[Any], record: Any) -> None:
    """A run's end in its trackers: the status and what it ran as tags, metrics.json, train.log and the user's source
    files the identity read as artifacts; the W&B run finished, with a non-zero exit code for a run that stopped
    (MLflow's status is Lightning's when it finalizes the logger, then :func:`stopped`'s)."""
    fields = {**record.fields, "folder": record.folder}
    files = [record.folder / f for f in ("metrics.json", "train.log") if (record.folder / f).is_file()]
    sources = user_sources(record.fields)
    for logger in loggers:
        try:
            if type(logger).__name__ == "MLFlowLogger":
                client, run_id = logger.experiment, logger.run_id
                for key, value in tags(fields).items():
                    client.set_tag(run_id, key, value)
                for file in files:
                    client.log_artifact(run_id, str(file))
                for name, path in sources.items():
                    client.log_artifact(run_id, str(path), str(Path("code", name).parent))
            elif type(logger).__name__ == "WandbLogger":
                run = logger.experiment
                run.summary.update({k.replace("attnexp.", "attnexp/"): v for k, v in tags(fields).items()})
                run.tags = wandb_tags(tags(fields))  # the status it ended with, not the one it started with
                for file in [*files, *sources.values()]:
                    run.save(str(file), base_path=str(file.parent), policy="now")
                run.finish(exit_code=wandb_exit_code(record.fields.get("status")))
        except Exception as err:  # a tracker that fails at the end loses no file of the run: said, and the run ends
            log.warning(f"{type(logger).__name__} could not record the end of the run: {type(err).__name__}: {err}")


def stopped(record: Any) -> None:
    """A run that stopped, in MLflow: its status tag and the matching end, ``KILLED`` for Ctrl-C or SIGTERM, else
    ``FAILED`` (after Lightning's own end of the run, which says ``FAILED`` for both)."""
    status = str(record.fields.get("status"))
    for found in (record.fields.get("trackers") or {}).values():
        try:
            if found.get("kind") == "mlflow" and "mlflow" in sys.modules:
                from mlflow import MlflowClient

                client = MlflowClient(found["tracking_uri"])
                client.set_tag(found["run_id"], "attnexp.status", status)
                client.set_terminated(found["run_id"], "KILLED" if status in KILLED else "FAILED")
        except Exception as err:
            log.warning(f"The {found.get('kind')} tracker could not record the run's end: {type(err).__name__}: {err}")


def user_sources(fields: Mapping[str, Any]) -> dict[str, Path]:
    """The user's source files the identity read (every file of ``code`` outside attnexp), by their names there."""
    from attnexp.runs.identity import user_modules
    from attnexp.runs.settings import targets

    names = [n for n in (fields.get("code") or {}).get("files", {}) if not n.startswith("attnexp/")]
    if not names:
        return {}
    cwd = Path(fields.get("cwd") or os.getcwd())
    found = user_modules([t for _, t in targets(fields.get("config") or {})], [cwd])
    by_name = {name: path for name, path in found.items() if name in names}
    return by_name or {n: cwd / n for n in names if (cwd / n).is_file()}


def take_figures(loggers: Iterable[Any]) -> bool:
    return any(type(lg).__name__ in ("MLFlowLogger", "WandbLogger") for lg in loggers)


def log_figure(loggers: Iterable[Any], tag: str, figure: Any, epoch: int) -> None:
    """A figure of the run in the trackers that take one (TensorBoard's writers draw their own)."""
    for logger in loggers:
        if type(logger).__name__ == "MLFlowLogger":
            logger.experiment.log_figure(logger.run_id, figure, f"{tag}.png")
        elif type(logger).__name__ == "WandbLogger":
            import wandb

            logger.experiment.log({tag: wandb.Image(figure), "epoch": epoch})


def prepare(cfg: DictConfig) -> None:
    """Each MLflow store and experiment of ``cfg``'s loggers made once, before a sweep's jobs start: jobs that make
    one SQLite store at once race (one finds the tables another is making)."""
    for node in nodes(cfg).values():
        if str(node.get("_target_")) == MLFLOW:
            from mlflow import MlflowClient

            uri = absolute(node.get("tracking_uri") or tracking_uri())
            client, name = MlflowClient(uri), str(node.get("experiment_name") or "lightning_logs")
            if client.get_experiment_by_name(name) is None:
                client.create_experiment(name, artifact_location=node.get("artifact_location") or artifacts_of(uri))


def artifacts_of(uri: str | None) -> str | None:
    """Where a SQLite store's runs keep their files: beside the store (MLflow's default is ./mlruns in the working
    folder)."""
    if not str(uri).startswith("sqlite:///"):
        return None
    return (Path(str(uri).removeprefix("sqlite:///")).parent / "mlartifacts").as_uri()


def mlflow_view(uri: str, page: str) -> str:
    """How to see an MLflow run: its page on a server, or ``mlflow ui`` on a store (a path as the user types it)."""
    if uri.startswith("http"):
        return f"{uri.rstrip('/')}/{page}"
    if uri.startswith("sqlite:///"):
        path = Path(uri.removeprefix("sqlite:///")).absolute()
        shown = path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
        uri = f"sqlite:///{shown}"
    return f"mlflow ui --backend-store-uri {shlex.quote(uri)}"
