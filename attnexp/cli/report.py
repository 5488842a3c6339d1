"""The lines ``attnexp`` prints about a run (what is about to train: :func:`attnexp.callbacks.record.describe`): the
test result and where the files are, a sweep job's result line, and the one paragraph of a run that stopped."""

from __future__ import annotations

import shlex
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from attnexp.errors import explain
from attnexp.runs import metrics_file

INTERRUPTED = (
    "stopped by Ctrl-C or SIGTERM. checkpoints/interrupted.ckpt holds the last completed step; the same "
    "command with resume=true continues from the last finished epoch."
)
WARNED = ("Run untrained", "Run unvalidated")  # lines about runs that finished without comparable numbers
LABELS = {
    metrics_file.BAD_INPUT: "Bad input",
    metrics_file.FAILED: "Run failed",
    metrics_file.DIVERGED: "Run diverged",
    metrics_file.INTERRUPTED: "Run interrupted",
}
DIGITS = 4


def is_multirun() -> bool:
    """Whether this process runs a sweep's job (Hydra's multirun)."""
    return HydraConfig.get().mode == RunMode.MULTIRUN


def job_name() -> str:
    """A sweep job's number and its varying overrides: ``#3 (model=euclid,seed=1)``."""
    job = HydraConfig.get().job
    return f"#{job.num} ({job.override_dirname or 'no overrides'})"


def result_line(output_dir: Path) -> list[str]:
    """A finished sweep job's line: its status, the task's first summary metric and its wall time."""
    found = metrics_file.read(output_dir)
    metric = next(iter(found.get("summary") or [["val/acc_best"]]))[0]
    value = found.get(metric)
    shown = f"{metric} {value:.{DIGITS}f}" if isinstance(value, (int, float)) else f"no {metric}"
    return [f"Job {job_name()}: {found.get('status', '?')}, {shown}, {found.get('wall_s', 0):.1f} s"]


def run_report(output_dir: Path) -> list[str]:
    """A finished single run's last lines: the test result (rounded, with the epoch of the checkpoint tested) or why
    there is none worth comparing, and where the run's files are."""
    found = metrics_file.read(output_dir)
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
    if status in (metrics_file.UNTRAINED, metrics_file.UNVALIDATED):
        lines.append(f"Run {status}: {found.get('error', '')} Comparisons leave this run out.")
    folder = shown(output_dir)
    lines.append(
        f"Run {status} in {found.get('wall_s', 0):.1f} s: {folder}/ holds metrics.json, checkpoints/ and train.log; "
        f"curves: tensorboard --logdir {shlex.quote(folder)}"
    )
    return lines


def shown(path: Path) -> str:
    """``path`` as the user would type it: relative to the current folder when inside it."""
    path = Path(path).absolute()
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def failure(status: str, err: BaseException, kept: bool = True, log_file: Path | None = None) -> str:
    """The one paragraph of a run that stopped; in a sweep it names the job. A run refused for bad input in a folder
    made for it leaves none (``kept`` False), and says so; ``log_file``: where its traceback is."""
    reason = INTERRUPTED if status == metrics_file.INTERRUPTED else explain(err)
    job = f" in job {job_name()}" if is_multirun() else ""
    removed = "" if kept else " Its run folder was removed: nothing of this run is kept."
    traceback = f" The traceback is in {shown(log_file)}." if log_file and kept else ""
    return f"{LABELS[status]}{job}: {reason}{removed}{traceback}"
