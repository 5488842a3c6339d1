"""How a run that stopped is explained and recorded in its metrics.json (through its :class:`RunRecord`): an error
inside a mixer named with the line of its code that raised, an allocation that failed with what to lower, and every
failure's traceback kept in the run's train.log."""

from __future__ import annotations

import logging
import re
import sys
import traceback
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from attnexp.cli import report
from attnexp.errors import OutOfMemory, explain, is_bad_input, root_cause
from attnexp.runs import metrics_file
from attnexp.runs.record import RunRecord


def stopped(cfg: DictConfig, err: BaseException, record: RunRecord) -> str:
    """Explain and record how a run stopped; return its status. The record says it (the folder's record of another
    process is left as it was), the console gets one paragraph, train.log the traceback of a failure."""
    raised, err = err, explained(cfg, err)
    if isinstance(raised, (KeyboardInterrupt, SystemExit)):
        status, error = metrics_file.INTERRUPTED, report.INTERRUPTED
    else:
        status, error = (metrics_file.BAD_INPUT if is_bad_input(err) else metrics_file.FAILED), explain(err)
    if record.fields.get("status") == metrics_file.DIVERGED:  # said by the record keeper, with the step
        status, error = metrics_file.DIVERGED, record.fields.get("error", error)
    if record.ours():
        record.write(status=status, error=error)
    logs = log_file() if status == metrics_file.FAILED else None
    if report.is_multirun() and status == metrics_file.INTERRUPTED:
        logging.getLogger("attnexp").info(report.result_line(record.folder)[0])
    else:
        logging.getLogger("attnexp").error(report.failure(status, explain(err), logs))
    if status != metrics_file.INTERRUPTED:
        keep_traceback(raised)
    return status


def explained(cfg: DictConfig, err: BaseException) -> BaseException:
    """``err`` as the user reads it: an allocation that failed explained (:func:`out_of_memory`), an error raised
    inside a mixer named with its line (:func:`attnexp.mixers.faults.explain_mixer_failure`), any other as it is."""
    cause = root_cause(err)
    if is_out_of_memory(cause):
        return out_of_memory(cfg, cause, parameter_count(cfg))
    if "torch" not in sys.modules:  # no mixer has run before torch is imported
        return err
    from attnexp.mixers.faults import explain_mixer_failure

    return explain_mixer_failure(err)


def parameter_count(cfg: DictConfig) -> int | None:
    """The network's parameters, counted on PyTorch's meta device (nothing is allocated); None when it cannot be
    built."""
    try:
        import torch
        from hydra.utils import instantiate

        from attnexp.build import network as build_net

        with torch.device("meta"):
            net = build_net(cfg.net, instantiate(cfg.data).spec)
        return sum(p.numel() for p in net.parameters())
    except Exception:
        return None


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
