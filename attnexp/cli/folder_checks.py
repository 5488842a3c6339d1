"""The pre-flight stage's look at the folders a command will write (:func:`check_folders`): writable, each job's
its own, none still training, and an unfinished run continued only by ``resume=true`` from a checkpoint of its
network."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from attnexp.cli.loggers import as_in_the_job
from attnexp.cli.typos import NOTHING
from attnexp.errors import AttnexpError
from attnexp.runs.metrics_file import DamagedRecord


def check_folders(jobs: list[DictConfig], sweep: bool, net_of: Callable[[DictConfig], Any]) -> None:
    """Each job's folder (from its identity and seed), and a sweep's own: writable, not shared by two jobs, not still
    training, and holding no unfinished run unless ``resume=true`` continues it, from a checkpoint of its network
    (``net_of``: a job's network)."""
    from attnexp.runs.folders import check_writable, checkpoint_dir, refusal, run_folder, shown, state

    check_writable(jobs[0].paths.log_dir)
    if sweep:
        check_writable(jobs[0].hydra.sweep.dir, "hydra.sweep.dir")
    found: dict[str, list[str]] = {}
    problems, damaged = [], []
    for cfg in jobs:
        folder = run_folder(_root_=cfg)
        as_in_the_job(cfg, folder)  # its ${hydra:runtime.output_dir}: its own folder, as in the job
        check_writable(folder)
        found.setdefault(folder, []).append(" ".join(cfg.hydra.overrides.task) or "the defaults")
        checkpoints = checkpoint_dir(cfg, folder)
        try:
            kind, record = state(folder, checkpoints)
        except DamagedRecord as err:  # every such job named, with its way out; the others checked on
            damaged.append((job_name(cfg, jobs), str(err).rstrip(".")))
            continue
        refused = refusal(folder, kind, record, bool(cfg.resume))
        if not refused and cfg.resume and kind in ("orphaned", "unfinished"):
            refused = foreign_checkpoint(folder, checkpoints / "last.ckpt", net_of(cfg))
        if refused:
            problems.append(refused)
    shared = [f"{' and '.join(names)} into {shown(folder)}" for folder, names in found.items() if len(names) > 1]
    if shared:
        problems.insert(
            0,
            f"These jobs would run the same settings, code, data and seed into one folder: "
            f"{'; '.join(shared)} (a value listed twice, or two spellings of one: list each once)",
        )
    if damaged and sweep:
        names = [name for name, _ in damaged]
        others = [job_name(cfg, jobs) for cfg in jobs if job_name(cfg, jobs) not in names]
        whole = f" ({', '.join(others)} {'is' if len(others) == 1 else 'are'} whole)" if others else ""
        problems.append(
            "; ".join(f"The sweep's job {name}: {why}" for name, why in damaged)
            + f". Then start the sweep again, or run its other jobs now by leaving {' and '.join(names)} out of the "
            f"swept values{whole}: a sweep starts whole or not at all, so that its comparison holds every job it lists"
        )
    elif damaged:
        problems.append(damaged[0][1])
    if problems:
        raise AttnexpError("; ".join(problems) + ". " + NOTHING)


def job_name(cfg: DictConfig, jobs: list[DictConfig]) -> str:
    """A sweep's job as its overrides that vary between the jobs (``seed=1``), else all of them."""
    mine = list(cfg.hydra.overrides.task)
    varying = [o for o in mine if any(o not in list(other.hydra.overrides.task) for other in jobs)]
    return " ".join(varying or mine) or "the defaults"


def foreign_checkpoint(folder: str, last: Path, net: Any) -> str | None:
    """Why ``resume=true`` cannot continue from ``last`` (a checkpoint another network wrote, copied into the folder),
    which the run would find only after writing its record; None where it fits, or is damaged (the run continues from
    another intact one, or says there is none)."""
    import torch

    from attnexp.errors import shown
    from attnexp.training.callbacks.checkpoints import check_fits, read_checkpoint

    if net is None or not last.is_file():
        return None
    try:
        state = {k: v for k, v in read_checkpoint(last)["state_dict"].items() if k.startswith("net.")}
    except AttnexpError:
        return None
    way_out = f"Move it out of the folder, or delete the run's folder (rm -r {shown(folder)}) to train this run anew"
    try:
        check_fits(state, torch.nn.ModuleDict({"net": net}), shown(last), way_out)
    except AttnexpError as err:
        return str(err).rstrip(".")
    return None
