"""How a run that stopped is explained and recorded: in its metrics.json (through its :class:`RunRecord`), or, refused
for bad input, by removing what it made (a sweep keeps a line for the job in its own folder:
:mod:`attnexp.runs.refusals`); an error inside a mixer named with the line of its code that raised, an allocation
that failed with what to lower, and every failure's traceback kept in the run's train.log."""

from __future__ import annotations

import logging
import re
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from attnexp.cli import report
from attnexp.errors import OutOfMemory, explain, is_bad_input, root_cause
from attnexp.runs import metrics_file, refusals
from attnexp.runs.folders import FolderTaken, short
from attnexp.runs.record import RunRecord


def sweep_dir() -> Path:
    return Path(HydraConfig.get().sweep.dir)


def job_key() -> str:
    """A sweep job's name as a file name, the same when the sweep is resumed."""
    job = HydraConfig.get().job
    return short(job.override_dirname or f"job{job.num}")


def forget_refusal() -> None:
    """A sweep job that runs again (a resumed sweep) is no longer refused until it is again."""
    refusals.forget(sweep_dir(), job_key())


def record_failure(cfg: DictConfig, err: BaseException, record: RunRecord) -> tuple[str, bool]:
    """Make sure the run's metrics.json says how it ended; return that status and whether the run folder is kept.

    A run refused for bad input in a folder made for it leaves no folder (in a sweep, a line in ``.refused/``). A
    record that another process wrote (the run this one was to resume, a run already in the folder) is left as it
    was: nothing of this run is in it."""
    if isinstance(err, (KeyboardInterrupt, SystemExit)):
        status, error = metrics_file.INTERRUPTED, report.INTERRUPTED
    else:
        status, error = (metrics_file.BAD_INPUT if is_bad_input(err) else metrics_file.FAILED), explain(err)
    found = record.found()
    if found.get("status") == metrics_file.DIVERGED:
        status = metrics_file.DIVERGED
    ours = record.ours() and not isinstance(root_cause(err), FolderTaken)
    if status == metrics_file.BAD_INPUT and record.fresh and ours:
        in_sweep = report.is_multirun()
        if in_sweep:
            folder, sweep = record.folder.absolute(), sweep_dir().absolute()
            folder = folder.relative_to(sweep) if folder.is_relative_to(sweep) else folder
            refusals.note(
                sweep_dir(),
                job_key(),
                {
                    "num": HydraConfig.get().job.num,
                    "job": report.job_name(),
                    "folder": str(folder),
                    "status": status,
                    "error": error,
                },
            )
        refusals.discard(record.folder, set(record.held), sweep_dir() if in_sweep else Path(cfg.paths.log_dir) / "runs")
        return status, False
    if ours:
        record.write(**{**found, "status": status, "error": error})
    return status, True


def explained(cfg: DictConfig, err: BaseException, params: Callable[[DictConfig], int | None]) -> BaseException:
    """``err`` as the user reads it: an allocation that failed explained (:func:`out_of_memory`, with the count of
    ``params``), an error raised
    inside a mixer named with its line (:func:`attnexp.mixers.faults.explain_mixer_failure`), any other as it is."""
    cause = root_cause(err)
    if is_out_of_memory(cause):
        return out_of_memory(cfg, cause, params(cfg))
    if "torch" not in sys.modules:  # no mixer has run before torch is imported
        return err
    from attnexp.mixers.faults import explain_mixer_failure

    return explain_mixer_failure(err)


def is_out_of_memory(cause: BaseException) -> bool:
    """A failed allocation: Python's MemoryError, torch's CUDA or MPS out of memory, or its CPU allocator's refusal."""
    text = str(cause).lower()
    return (
        isinstance(cause, MemoryError)
        or type(cause).__name__ == "OutOfMemoryError"
        or "out of memory" in text
        or "can't allocate memory" in text
    )


def out_of_memory(cfg: DictConfig, cause: BaseException, params: int | None) -> OutOfMemory:
    """The paragraph for an allocation that failed: the model's size, the batch, the device, and what to lower."""
    text = " ".join(str(cause).split())
    device = (
        "the GPU" if "cuda" in text.lower() or type(cause).__name__ == "OutOfMemoryError" else "the CPU (main memory)"
    )
    asked = re.search(r"allocate (\d+) bytes", text) or re.search(r"[Tt]ried to allocate ([\d.]+ [KMGT]iB)", text)
    size = "" if asked is None else f" {int(asked[1]) / 2**30:.2f} GiB" if asked[1].isdigit() else f" {asked[1]}"
    model = (
        (
            f"{params:,} parameters ({params * 4 / 2**30:.2f} GiB as float32; training with Adam keeps about 4 times "
            "that)"
        )
        if params
        else "a size that could not be counted"
    )
    batch = OmegaConf.select(cfg, "data.batch_size", default="?")
    devices = OmegaConf.select(cfg, "trainer.devices", default=1)
    keys = [
        f"{k}={OmegaConf.select(cfg, k)}"
        for k in ("net.dim", "net.depth", "model.heads")
        if OmegaConf.select(cfg, k, default=None) is not None
    ]
    return OutOfMemory(
        f"Out of memory on {device}: an allocation of{size or ' memory'} failed. The model has {model} and trains on "
        f"batches of {batch}{f' on each of {devices} devices' if devices not in (1, '1', 'auto') else ''}"
        f"{' (' + ', '.join(keys) + ')' if keys else ''}. Lower data.batch_size (data.eval_batch_size for validation "
        "and test), net.dim or net.depth; trainer.precision=bf16-mixed halves the activations; a sweep on one machine "
        "can run fewer jobs at once (hydra.launcher.n_jobs=1)."
    )


def log_file() -> Path | None:
    """The run's train.log (Hydra's file handler on the root logger), or None."""
    files = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    return Path(files[0].baseFilename) if files else None


def keep_traceback(err: BaseException) -> None:
    """Write ``err``'s traceback to train.log only (the console keeps its one paragraph)."""
    logger = logging.getLogger("attnexp.traceback")
    text = "".join(traceback.format_exception(err)).rstrip()
    record = logger.makeRecord(logger.name, logging.ERROR, __file__, 0, text, (), None)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)
