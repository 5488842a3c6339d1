"""The conformance kit's last check: a few batches of the composed run, as ``attnexp`` would run it, with every callback
and logger on (Lightning's ``fast_dev_run`` turns them off), in a temporary folder: what would crash a run crashes
here first. Then the kit's leak and padding checks once more, at the parameters those batches trained."""

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
    """``attnexp``'s training of ``cfg`` on :data:`BATCHES` batches of each split in a temporary folder: what ran and
    what it wrote. Bad input is raised as it would stop the run; any other error fails the check, explained."""
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
                train(run, RunRecord.open(folder, run, choices_of(HydraConfig.get()), [], HydraConfig.get().searchpath))
        except Exception as err:
            explained = failures.explained(cfg, err)
            if is_bad_input(explained):
                raise
            return Result("smoke run", False, explain(explained))
        ran = what_ran(Path(folder), time.perf_counter() - start)
        record = metrics_file.read(folder)
        if record.get("status") == metrics_file.INVALID:
            return Result("smoke run", False, f"{ran}: {record.get('error')}")
        ok, trained = trained_checks(cfg, Path(folder) / "checkpoints" / "last.ckpt")
        return Result("smoke run", ok, f"{ran}; {trained}")


def trained_checks(cfg: DictConfig, checkpoint: Path) -> tuple[bool, str]:
    """The kit's leak and padding checks on each mixer of the network at the parameters the smoke run trained (its
    last checkpoint), each at its own size: a leak the constructor's parameters hide may show after a few steps."""
    import torch
    from hydra.utils import instantiate

    from attnexp.mixers import is_mixer
    from attnexp.mixers.conformance import masks
    from attnexp.mixers.conformance.kit import Kit, Size, trained

    if not checkpoint.exists():
        return True, "no checkpoint written: the trained parameters were not checked"
    net = composed_network(cfg)
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]
    net.load_state_dict({k.removeprefix("net."): v for k, v in state.items() if k.startswith("net.")})
    mixers, factory, failed = [m for m in net.modules() if is_mixer(m)], instantiate(cfg.model), []
    for layer, mixer in enumerate(mixers):
        kit = Kit(factory, cfg.seed, Size.of(mixer.request)).at(trained(mixer.state_dict()))
        for name, check in (("no causal leak", masks.causal_leak), ("key padding invisible", masks.padding_invisible)):
            with torch.no_grad():
                ok, measured = check(kit)
            if ok is False:
                failed.append(f"layer {layer}: {name} fails at the trained parameters: {measured}")
    if failed:
        return False, "; ".join(failed)
    checked = counted(len(mixers), "mixer")
    return True, f"at the trained parameters of its {checked}: no causal leak, key padding invisible"


def composed_network(cfg: DictConfig) -> Any:
    """The network ``cfg`` composes (its constructor's parameters)."""
    from hydra.utils import instantiate

    from attnexp.cli.build import network

    return network(cfg.net, instantiate(cfg.data).spec)


def smoke_config(cfg: DictConfig, folder: str) -> Any:
    """``cfg`` with its outputs in ``folder`` and one short epoch: :data:`BATCHES` batches of each split."""
    run = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    with open_dict(run):
        run.paths.output_dir = run.paths.log_dir = folder
        run.resume, run.ckpt_path = False, None
        run.trainer.update(max_epochs=1, max_steps=-1, val_check_interval=None, check_val_every_n_epoch=1)
        run.trainer.update({f"limit_{split}_batches": BATCHES for split in ("train", "val", "test")})
        if OmegaConf.select(run, "callbacks.progress_bar") is not None:
            run.callbacks.progress_bar.refresh_rate = 0  # the kit prints lines, not a bar
    return run


def what_ran(folder: Path, seconds: float) -> str:
    """What the run wrote: its record's status, checkpoints, telemetry values and figures."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    record, figures = metrics_file.read(folder), EventAccumulator(str(folder)).Reload().Tags()["images"]
    wrote = [counted(len(list((folder / "checkpoints").glob("*.ckpt"))), "checkpoint")]
    wrote += [counted(sum(k.startswith("attn/") for k in record), "telemetry value"), counted(len(figures), "figure")]
    return (
        f"{BATCHES} training, {BATCHES} validation and {BATCHES} test batches, every callback: metrics.json "
        f"{record.get('status', 'missing')}, {', '.join(wrote)} ({seconds:.1f} s)"
    )


def counted(n: int, thing: str) -> str:
    return f"{n} {thing}{'s' * (n != 1)}"
