"""The conformance kit's last check: the composed run itself, a few batches of it, as ``attnexp`` would run it.

Training, validation and test batches of the composed network and data with every callback and logger the run has
(checkpoints, metrics.json, telemetry, figures, TensorBoard), in a temporary folder that is removed afterwards, as
Lightning's ``fast_dev_run`` does but with the callbacks and loggers on (``fast_dev_run`` turns them off). What
would crash a run crashes here first.
"""

from __future__ import annotations

import logging
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from attnexp.cli import console, failures
from attnexp.errors import explain, is_bad_input
from attnexp.mixers.conformance import Result
from attnexp.runs import metrics_file

BATCHES = 2  # training, validation and test batches
LIBRARY_LOGGERS = ("pytorch_lightning", "lightning.pytorch", "lightning_fabric", "lightning")


def smoke_run(cfg: DictConfig) -> Result:
    """``attnexp``'s training of ``cfg`` on :data:`BATCHES` batches of each split, one epoch, in a temporary folder;
    its measure says what ran and what the run wrote. An error from the data or the settings (bad input) is raised
    as it would stop the run; any other fails the check, pointing into the mixer's code where it was raised there."""
    from hydra.core.hydra_config import HydraConfig

    from attnexp.cli.train import train
    from attnexp.runs.folders import choices_of
    from attnexp.runs.record import RunRecord

    with tempfile.TemporaryDirectory(prefix="attnexp-check-") as folder:
        run = smoke_config(cfg, folder)
        start = time.perf_counter()
        try:
            with warnings.catch_warnings(), console.quiet(logging.CRITICAL, *LIBRARY_LOGGERS, "attnexp"):
                warnings.simplefilter("ignore")  # the run's own lines, Lightning's messages and warnings: not the kit's
                train(run, RunRecord.open(folder, run, choices_of(HydraConfig.get()), []))
        except Exception as err:
            explained = failures.explained(cfg, err)
            if is_bad_input(explained):
                raise
            return Result("smoke run", False, explain(explained))
        return Result("smoke run", True, what_ran(Path(folder), time.perf_counter() - start))


def smoke_config(cfg: DictConfig, folder: str) -> Any:
    """``cfg`` with its outputs in ``folder`` and one short epoch: :data:`BATCHES` batches of each split."""
    run = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    with open_dict(run):
        run.paths.output_dir = run.paths.log_dir = folder
        run.resume, run.ckpt_path = False, None
        run.trainer.update(
            max_epochs=1,
            max_steps=-1,
            limit_train_batches=BATCHES,
            limit_val_batches=BATCHES,
            limit_test_batches=BATCHES,
            val_check_interval=None,
            check_val_every_n_epoch=1,
        )
        bar = OmegaConf.select(run, "callbacks.progress_bar")
        if bar is not None:
            bar.refresh_rate = 0  # the kit prints lines, not a bar
    return run


def what_ran(folder: Path, seconds: float) -> str:
    """What the run wrote: its record's status, checkpoints, telemetry values and figures."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    record = metrics_file.read(folder)
    checkpoints = len(list((folder / "checkpoints").glob("*.ckpt")))
    telemetry = sum(k.startswith("attn/") for k in record)
    figures = EventAccumulator(str(folder)).Reload().Tags()["images"]  # the TensorBoard files' image tags
    return (
        f"{BATCHES} training, {BATCHES} validation and {BATCHES} test batches, every callback: metrics.json "
        f"{record.get('status', 'missing')}, {counted(checkpoints, 'checkpoint')}, "
        f"{counted(telemetry, 'telemetry value')}, "
        f"{counted(len(figures), 'figure')} ({seconds:.1f} s)"
    )


def counted(n: int, thing: str) -> str:
    return f"{n} {thing}{'s' * (n != 1)}"
