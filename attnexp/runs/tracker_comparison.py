"""A comparison in the trackers its runs are in (:mod:`attnexp.runs.trackers`): per MLflow experiment a parent run
holding the summary files and plots with each configuration's verdicts as tags of its runs, per W&B project a run of
the sweep's group holding the same. mlflow and wandb are imported only where a run's record names them."""

from __future__ import annotations

import hashlib
import logging
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from attnexp.runs.trackers import mlflow_view, run_name, tags, wandb_exit_code, wandb_tags

log = logging.getLogger("attnexp")


def compared(result: Any, written: Iterable[Path], where: Path) -> list[str]:
    """A comparison in the trackers its runs are in: per MLflow experiment one parent run (named by ``where``, the
    sweep or comparison folder; found again for the same runs, so a comparison made twice adds no run) holding the
    summary tables and figures, each configuration's verdicts as tags of its runs; per W&B project a run of the
    sweep's group holding the tables, figures and a verdicts table, the verdicts as tags of its runs too. The tracker
    views, said once."""
    rows = [(row, run) for row in result.rows for run in row.runs]
    said = []
    mlflow_runs: dict[tuple[str, str], list[tuple[Any, str]]] = {}
    wandb_runs: dict[tuple[str, str, bool], list[tuple[Any, Mapping[str, Any], Any]]] = {}
    for row, run in rows:
        for found in (run.metrics.get("trackers") or {}).values():
            if found.get("kind") == "mlflow":
                key = (found["tracking_uri"], found["experiment_id"])
                mlflow_runs.setdefault(key, []).append((row, found["run_id"]))
            elif found.get("kind") == "wandb":
                place = (found["project"], found["save_dir"], found["offline"])
                wandb_runs.setdefault(place, []).append((row, found, run))
    files = [Path(p) for p in written if Path(p).is_file()]
    for (uri, experiment), members in mlflow_runs.items():
        try:
            said.append(mlflow_comparison(uri, experiment, members, files, where))
        except Exception as err:
            log.warning(f"MLflow could not record the comparison: {type(err).__name__}: {err}")
    for (project, save_dir, offline), found in wandb_runs.items():
        try:
            said.append(wandb_comparison(project, save_dir, offline, found, files, where))
        except Exception as err:
            log.warning(f"W&B could not record the comparison: {type(err).__name__}: {err}")
    return said


def verdict_tags(row: Any) -> dict[str, str]:
    found = {"attnexp.configuration": row.config, "attnexp.baseline": row.baseline or row.no_baseline}
    return {k: v for k, v in found.items() if v} | {f"verdict/{m}": v for m, v in row.verdicts.items() if v}


def mlflow_comparison(uri: str, experiment: str, members: list[tuple[Any, str]], files: list[Path], where: Path) -> str:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    key = hashlib.sha256(" ".join(sorted(run_id for _, run_id in members)).encode()).hexdigest()[:16]
    same = client.search_runs([experiment], filter_string=f"tags.`attnexp.comparison` = '{key}'", max_results=1)
    if same:
        parent = same[0].info.run_id
    else:
        made = client.create_run(experiment, run_name=f"comparison {where}", tags={"attnexp.comparison": key})
        parent = made.info.run_id
    client.set_tag(parent, "attnexp.folder", str(where))
    for file in files:
        client.log_artifact(parent, str(file), "plots" if file.suffix == ".png" else None)
    for row, run_id in members:
        client.set_tag(run_id, "mlflow.parentRunId", parent)  # MLflow's own tag: the UI nests the runs under it
        for name, value in verdict_tags(row).items():
            client.set_tag(run_id, name, value)
    client.set_terminated(parent, "FINISHED")
    return mlflow_view(uri, f"#/experiments/{experiment}/runs/{parent}")


def wandb_comparison(
    project: str, save_dir: str, offline: bool, found: list[tuple[Any, Any, Any]], files: list[Path], where: Path
) -> str:
    import wandb

    group = next((f.get("group") for _, f, _ in found if f.get("group")), None) or str(where)
    same = hashlib.sha256(" ".join(sorted(str(f.get("id")) for _, f, _ in found)).encode()).hexdigest()[:16]
    mode: Literal["offline"] | None = "offline" if offline else None
    run = wandb.init(
        id=f"comparison-{same}",  # the same runs compared again continue this run
        resume="allow",
        project=project,
        dir=save_dir,
        group=group,
        job_type="comparison",
        name=f"comparison {where}",
        mode=mode,
        reinit="create_new",
    )
    try:
        verdicts = [[f.get("id"), row.config, m, v] for row, f, _ in found for m, v in verdict_tags(row).items()]
        run.log({"verdicts": wandb.Table(columns=["run", "configuration", "tag", "value"], data=verdicts)})
        for file in files:
            if file.suffix == ".png":
                run.log({f"plots/{file.stem}": wandb.Image(str(file))})
            run.save(str(file), base_path=str(file.parent), policy="now")
        run.summary["attnexp/folder"] = str(where)
    finally:
        run.finish()
    for row, f, member in found:
        wandb_verdicts(row, f, member, project, save_dir, mode)
    runs = Path(run.dir).parent.parent  # every offline run of the project's folder, the sweep's among them
    return f"wandb sync {shlex.quote(str(runs))}/offline-run-*" if offline else f"W&B group {group}"


def wandb_verdicts(row: Any, found: Mapping[str, Any], member: Any, project: str, save_dir: str, mode: Any) -> None:
    """A W&B run's tags with its configuration's verdicts: the run continued (its id, ``resume="allow"``) for its
    tags alone. An offline run continued so is one more folder of the same run, which ``wandb sync`` uploads after
    the first; its tags are the whole set, as a continued offline run does not know the ones it had."""
    import wandb

    fields = {**member.metrics, "folder": member.folder}
    run = wandb.init(
        id=found["id"],
        resume="allow",
        project=project,
        dir=save_dir,
        group=found.get("group") or None,
        name=found.get("name") or run_name(member.folder.resolve()),  # a sweep's job folder links to the run's
        tags=wandb_tags({**tags(fields), **verdict_tags(row)}),
        mode=mode,
        reinit="create_new",
    )
    run.finish(exit_code=wandb_exit_code(member.metrics.get("status")))
