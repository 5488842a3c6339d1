"""How a run that stopped is explained and recorded in its metrics.json (through its :class:`RunRecord`): an error
inside a mixer named with the line of its code that raised, an allocation that failed with what to lower, and every
failure's traceback kept in the run's train.log."""

from __future__ import annotations

import logging
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from attnexp.cli import build, console, ranks, report
from attnexp.errors import (
    DiskFull,
    MixerError,
    explain,
    is_bad_input,
    is_disk_full,
    is_out_of_memory,
    out_of_memory,
    root_cause,
)
from attnexp.runs import metrics_file, trackers
from attnexp.runs.folders import checkpoints_of
from attnexp.runs.record import RunRecord

UNRECORDED = "There was no room for the run's record either: metrics.json says nothing of this start."


def stopped(cfg: DictConfig, err: BaseException, record: RunRecord) -> str:
    """Explain and record how a run stopped; return its status. The record says it (the folder's record of another
    process is left as it was), the console gets one paragraph, train.log the traceback of a failure."""
    raised, err = err, explained(cfg, err, record.folder)
    if isinstance(raised, (KeyboardInterrupt, SystemExit)):
        status, error = metrics_file.INTERRUPTED, report.INTERRUPTED
    else:
        status, error = (metrics_file.BAD_INPUT if is_bad_input(err) else metrics_file.FAILED), explain(err)
    if record.fields.get("status") == metrics_file.DIVERGED and not isinstance(err, MixerError):  # said with the step
        status, error = metrics_file.DIVERGED, record.fields.get("error", error)
    if isinstance(err, DiskFull):  # train.log can take no more either: the paragraph goes to the console alone
        console.detach_files(record.folder)
    if record.ours() and ranks.is_global_zero():  # rank 0 records how a data-parallel run ended
        try:
            record.write(status=status, error=error)
        except OSError:  # a full disk with no room even for the record: it stays whole as it was, the console says it
            if not isinstance(err, DiskFull):
                raise
            err = DiskFull(f"{err} {UNRECORDED}")
        trackers.stopped(record)
    logs = log_file() if status == metrics_file.FAILED else None
    if report.is_multirun() and status == metrics_file.INTERRUPTED:
        logging.getLogger("attnexp").info(report.result_line(record.folder)[0])
    else:
        logging.getLogger("attnexp").error(report.failure(status, explain(err), logs))
    if status != metrics_file.INTERRUPTED and not isinstance(err, DiskFull):
        keep_traceback(raised)
    return status


def explained(cfg: DictConfig, err: BaseException, folder: Path | None = None) -> BaseException:
    """``err`` as the user reads it: a failed allocation, a full disk, an error inside a mixer or a NaN a mixer made
    explained, any other as it is."""
    cause = root_cause(err)
    if is_out_of_memory(cause):
        return out_of_memory(cfg, cause, build.parameter_count(cfg))
    if folder is not None and is_disk_full(err):
        return disk_full(folder)
    if "torch" not in sys.modules:  # no mixer has run before torch is imported
        return err
    from attnexp.mixers.faults import explain_mixer_failure
    from attnexp.training.divergence import DivergedError

    return nan_in_mixer(cfg, err) if isinstance(cause, DivergedError) else explain_mixer_failure(err)


def nan_in_mixer(cfg: DictConfig, err: BaseException) -> BaseException:
    """A loss that became NaN because a mixer makes a NaN or infinity from finite inputs: on the batch of the first
    step whose loss was not finite, replayed at the parameters that step ran with (the error's ``origin``), else at
    the parameters the run started from, on a training batch. The mixer's bug (a failed run, :class:`MixerError`),
    named at the line that made it, with the kit's command at the run's data and length. Else ``err`` as it is:
    training made the loss NaN (the learning rate, the precision)."""
    cause = root_cause(err)
    found, when = getattr(cause, "origin", None), f"at step {getattr(cause, 'step', '?')}, on that step's batch"
    if found is None:
        when = "at its initial parameters on a training batch"
        try:
            found = first_nonfinite(cfg)
        except Exception:  # the diagnosis is a help: the divergence stands as it was said
            return err
    if found is None:
        return err
    said = " ".join(str(cause).split()).split(". ")[0]
    explained = MixerError(
        f"the mixer {found.mixer} made a NaN or infinity from finite inputs, {when}: first at {found.file}:"
        f"{found.line}, in {found.function}. {said}: the NaN came from the mixer's own arithmetic, not from the "
        f"learning rate or the precision; {kit_command(cfg)} checks it at the run's data and length."
    )
    explained.__cause__ = err
    return explained


def kit_command(cfg: DictConfig) -> str:
    """``attnexp-check`` with the run's overrides that choose the mixer and the network (its data, length, width)."""
    import shlex

    from hydra.core.hydra_config import HydraConfig

    groups = ("model", "data", "net", "task", "experiment")
    try:
        hydra_cfg = HydraConfig.get()
        given, model = list(hydra_cfg.overrides.task), hydra_cfg.runtime.choices.get("model")
    except ValueError:  # not inside a Hydra app
        given, model = [], None
    kept = [o for o in given if o.split("=", 1)[0].lstrip("+~").split(".", 1)[0].split("/", 1)[0] in groups]
    if not any(o.startswith("model=") for o in kept):
        kept.insert(0, f"model={model or '...'}")
    return " ".join(["attnexp-check", *map(shlex.quote, kept)])


def first_nonfinite(cfg: DictConfig) -> Any:
    """Where a mixer of ``cfg``'s network, at the parameters the run starts from (seeded alike), first makes a NaN or
    infinity from finite inputs on the first training batch (8 samples, eval mode), or None."""
    import pytorch_lightning as pl
    from hydra.utils import instantiate

    from attnexp.mixers.tracing import traced

    data = instantiate(cfg.data)
    data.prepare_data()
    data.setup("fit")
    pl.seed_everything(cfg.seed, verbose=False)  # the network's parameters are drawn as the run drew them
    net = build.network(cfg.net, data.spec).eval()
    x, y = next(iter(data.train_dataloader()))[:2]
    trace, _ = traced(lambda: instantiate(cfg.task).forward(net, x[:8].cpu(), y[:8].cpu()))
    return trace.first_nonfinite()


def disk_full(folder: Path) -> DiskFull:
    """The paragraph for a run that found no space to write: where, how much is free, what a checkpoint needs, the
    checkpoints cut short by it (removed, and named) and the way on: resume=true from the newest intact checkpoint,
    or, with none, the same command again."""
    from attnexp.training.callbacks.checkpoints import DamagedCheckpoint, read_checkpoint

    where = checkpoints_of(folder, metrics_file.read(folder))
    checkpoints = sorted(where.glob("*.ckpt"), key=lambda p: p.stat().st_mtime)
    damaged = []
    for path in checkpoints:
        try:
            read_checkpoint(path)
        except DamagedCheckpoint:
            damaged.append(path)
    for path in damaged:  # they continue nothing, and take room
        path.unlink(missing_ok=True)
    intact = [p for p in checkpoints if p not in damaged]
    free = shutil.disk_usage(folder).free
    size = max((p.stat().st_size for p in intact), default=0)
    need = (
        f" An epoch writes up to two checkpoints of {size / 2**20:.1f} MiB: free {2 * size / 2**20:.1f} MiB at least."
        if size
        else ""
    )
    cut = f" Removed the checkpoints it cut short: {', '.join(p.name for p in damaged)}." if damaged else ""
    then = (
        "run the same command with resume=true: it continues from the newest intact checkpoint"
        if intact
        else "run the same command again: no checkpoint was whole yet, so the run starts over"
    )
    return DiskFull(
        f"No space left on the disk of {report.shown(folder)} ({free / 2**20:.1f} MiB free).{need}{cut} Make "
        f"room there (or move the runs with paths.log_dir=/another/disk), then {then}."
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
