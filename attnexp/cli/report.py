"""The lines ``attnexp`` prints about a run (what is about to train:
:func:`attnexp.training.callbacks.record.describe`): the test result and where the files are, a sweep job's result
line, a run already finished, and the one paragraph of a run that stopped."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from attnexp.errors import shown
from attnexp.runs import metrics_file
from attnexp.runs.trackers import mlflow_view

INTERRUPTED = (
    "stopped by Ctrl-C or SIGTERM. checkpoints/interrupted.ckpt holds the last completed step; the same "
    "command with resume=true continues from the last finished epoch."
)
STOPPED = (
    "Stopped by Ctrl-C or SIGTERM: the runs that were training end where they are (a sweep's are reported abandoned); "
    "the same command with resume=true continues them from their last finished epoch and skips the finished ones."
)
WARNED = ("Run untrained", "Run unvalidated", "Run invalid")  # runs that finished without comparable numbers
# "Run failed", "Run diverged", "Run interrupted" (the first three of STOPPED), "Bad input"
LABELS = {metrics_file.BAD_INPUT: "Bad input"} | {s: f"Run {s}" for s in metrics_file.STOPPED[:3]}
DIGITS = 4


def is_multirun() -> bool:
    """Whether this process runs a sweep's job (Hydra's multirun)."""
    return HydraConfig.get().mode == RunMode.MULTIRUN


def job_name() -> str:
    """A sweep job's number and its varying overrides: ``#3 (model=euclid,seed=1)``."""
    job = HydraConfig.get().job
    return f"#{job.num} ({job.override_dirname or 'no overrides'})"


def link_job(folder: Path) -> None:
    """A sweep job's entry in the sweep's folder: a link to its run folder named by the overrides that vary
    (``model=euclid/seed=1``), which TensorBoard and ``attnexp-compare`` follow."""
    job = HydraConfig.get().job
    link = Path(HydraConfig.get().sweep.dir) / job_dirname(job.override_dirname, job.num)
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(Path(folder).absolute())


def job_dirname(overrides: str, num: int) -> str:
    """A sweep job's name: the overrides that vary, one folder level each, the mixer first (``model=euclid/seed=1``);
    ``/`` inside a value becomes ``_``; ``job<num>`` where nothing varies or a name would be too long."""
    items = [i.replace("/", "_").replace("'", "").replace('"', "") for i in str(overrides).split(",") if i]
    items.sort(key=lambda item: (not item.lstrip("+~").startswith("model="), item))
    return "/".join(items) if items and max(len(i.encode()) for i in items) <= 200 else f"job{num}"


def result_line(output_dir: Path, found: dict[str, Any] | None = None) -> list[str]:
    """A sweep job's line: its status, the task's first summary metric and its wall time."""
    found = found or metrics_file.read(output_dir)
    metric = next(iter(found.get("summary") or [["val/acc_best"]]))[0]
    value = found.get(metric)
    shown_value = f"{metric} {value:.{DIGITS}f}" if isinstance(value, (int, float)) else f"no {metric}"
    return [f"Job {job_name()}: {found.get('status', '?')}, {shown_value}, {found.get('wall_s', 0):.1f} s"]


def run_report(output_dir: Path, found: dict[str, Any] | None = None) -> list[str]:
    """A finished single run's last lines: the test result (rounded, with the epoch of the checkpoint tested) or why
    there is none worth comparing, and where the run's files are."""
    found = found or metrics_file.read(output_dir)
    lines = []
    tested = {k: v for k, v in found.items() if k.startswith("test/") and isinstance(v, (int, float))}
    if tested:
        monitor, best = found.get("monitor", "val/acc"), found.get("monitor_best")
        checkpoint = f"checkpoint of epoch {found['tested_epoch']}" if found.get("tested_epoch") else "last weights"
        chosen = f", {monitor} {best:.{DIGITS}f}" if isinstance(best, (int, float)) else ""
        lines.append(
            f"Test ({checkpoint}{chosen}): " + ", ".join(f"{k} {v:.{DIGITS}f}" for k, v in sorted(tested.items()))
        )
    status = found.get("status", "?")
    if status in (metrics_file.UNTRAINED, metrics_file.UNVALIDATED, metrics_file.INVALID):
        lines.append(f"Run {status}: {found.get('error', '')} Comparisons leave this run out.")
    shown_views = "; ".join(views(found, Path(output_dir)))
    lines.append(
        f"Run {status} in {found.get('wall_s', 0):.1f} s: {shown(output_dir)}/ holds metrics.json, checkpoints/ and "
        f"train.log" + (f"; curves: {shown_views}" if shown_views else "")
    )
    return lines


def views(fields: Mapping[str, Any], folder: Path) -> list[str]:
    """The commands that show a run's curves, one per logger it wrote to; TensorBoard's where the record predates
    the ``trackers`` field."""
    if "trackers" not in fields:
        return [f"tensorboard --logdir {shlex.quote(shown(folder))}"]
    found = []
    for tracker in fields["trackers"].values():
        kind = tracker.get("kind")
        if kind == "tensorboard":
            found.append(f"tensorboard --logdir {shlex.quote(shown(folder))}")
        elif kind == "mlflow":
            page = f"#/experiments/{tracker.get('experiment_id')}/runs/{tracker.get('run_id')}"
            found.append(mlflow_view(str(tracker.get("tracking_uri")), page))
        elif kind == "wandb":
            offline = tracker.get("offline")
            found.append(f"wandb sync {shlex.quote(tracker['dir'])}" if offline else f"W&B run {tracker.get('id')}")
        elif kind == "csv":
            found.append(shlex.quote(shown(Path(tracker.get("dir") or folder) / "metrics.csv")))
    return list(dict.fromkeys(found))


def finished(folder: Path, found: dict[str, Any]) -> list[str]:
    """A run whose folder already holds it, finished: said, with its result, and skipped."""
    where = f"job {job_name()}" if is_multirun() else "This run"
    said = (
        f"{where} already finished in {shown(folder)} (status {found.get('status')}, started {found.get('started')}): "
        "the same settings, code, data and seed compute the same numbers, so it is not run again (delete the folder "
        "to run it anew)."
    )
    return [said, *(result_line(folder, found) if is_multirun() else run_report(folder, found)[:1])]


def restarted(folder: Path, found: dict[str, Any]) -> str:
    """A run that stopped before its first checkpoint, started again: from the start, in its folder."""
    where = f"Job {job_name()}" if is_multirun() else "This run"
    return (
        f"{where} stopped before its first checkpoint in {shown(folder)} (status {found.get('status')}): there is "
        "nothing to continue, so it runs again from the start."
    )


def nothing_to_resume(folder: Path, code: dict[str, Any]) -> str:
    """What ``resume=true`` says when the folder of these settings is new: which runs of the same mixer, data and seed
    there are, and what differs (an edited file makes another configuration)."""
    from attnexp.runs.identity import differing_code

    here, others = Path(folder), []
    for other in sorted(here.parent.parent.glob(f"{here.parent.name.rsplit('_', 1)[0]}_*/{here.name}")):
        with contextlib.suppress(metrics_file.DamagedRecord):
            record = metrics_file.read(other)
            changed = differing_code(record.get("code") or {}, code)
            what = f"code: {', '.join(changed[:3])}{' ...' * (len(changed) > 3)}" if changed else "settings or data"
            others += [f"{shown(other)} ({what} differ)"] if other != here and record else []
    found = f" Runs of other versions: {'; '.join(others)}." if others else ""
    return f"Nothing to resume in {shown(folder)}: starting this run fresh.{found}"


def failure(status: str, reason: str, log_file: Path | None = None) -> str:
    """The one paragraph of a run that stopped; in a sweep it names the job; ``log_file``: where its traceback is."""
    reason = INTERRUPTED if status == metrics_file.INTERRUPTED else reason
    job = f" in job {job_name()}" if is_multirun() else ""
    traceback = f" The traceback is in {shown(log_file)}." if log_file else ""
    return f"{LABELS[status]}{job}: {reason}{traceback}"
