"""The pre-flight stage: everything on a command line that can be wrong is found before any folder exists and said in
one paragraph (exit status 2): each job composed once (types: :mod:`attnexp.cli.schema`; what Hydra cannot compose:
:mod:`attnexp.cli.typos`), values no constructor owns checked, classes loaded, objects built as the run will build them
(:func:`attnexp.cli.build.check`), the Trainer built as Lightning checks its arguments (:func:`check_trainer`), each
job's folder found from its identity, and its loggers built (:mod:`attnexp.cli.loggers`). A bug in the user's own code
is no bad input: the run meets it and records it."""

from __future__ import annotations

import itertools
import logging
import shutil
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from attnexp.cli import build, console, flags, hardware, hydra_warnings, loggers, targets, typos, values
from attnexp.cli.folder_checks import check_folders
from attnexp.cli.typos import NOTHING
from attnexp.errors import AttnexpError, root_cause
from attnexp.runs import data as data_of_run

NOT_RUN = {"-c", "--cfg", "-i", "--info", "-p", "--package"}  # flags that print instead of running


def check(args: Sequence[str], config_dir: str, config_name: str = "train", folders: bool = True) -> list[DictConfig]:
    """The configs of the command line's jobs, each checked (none where Hydra alone answers: ``--help``, ``--cfg``).
    ``folders``: the jobs write run folders (the conformance kit's do not)."""
    jobs = jobs_of(args, config_dir, config_name)
    if not jobs or {a.split("=", 1)[0] for a in args if a.startswith("-")} & NOT_RUN:
        return []
    loggers.check_resolved(jobs)  # ${hydra:...} reads a job's Hydra config, as in the job
    for cfg in jobs:
        values.check_values(cfg)
    if is_sweep(args, jobs[0]):
        check_launcher(jobs[0].hydra.launcher)
    nets = {}  # each configuration's network, on the meta device
    for key, cfg in {built(c): c for c in jobs}.items():
        targets.check_targets(cfg, list(cfg.hydra.searchpath), list(cfg.hydra.overrides.task))
        nets[key] = check_build(cfg)
    for cfg in {str(OmegaConf.to_container(c.trainer, resolve=False)): c for c in jobs}.values():
        values.check_trainer_switches(cfg)
        check_trainer(cfg)
        hardware.check_devices(cfg)
    loggers.check_loggers(jobs)
    if folders:
        check_folders(jobs, is_sweep(args, jobs[0]), lambda cfg: nets.get(built(cfg)))
        loggers.check_loggers(jobs, prepare=True)  # last: the MLflow stores the loggers name made
    return jobs


def built(cfg: DictConfig) -> str:
    """What tells one configuration's objects from another's: the groups that build them."""
    return str(OmegaConf.masked_copy(cfg, ["model", "net", "data", "task", "module"]))


def sweep_overrides(args: Sequence[str], jobs: list[DictConfig]) -> list[str]:
    """For a sweep, Hydra overrides that every job's process reads as it composes its own config: the sweep's folder,
    resolved once here (its ``${now:...}`` would read another time in each of joblib's processes), the keys every
    job shares, left out of the job links' names (``model=euclid/seed=1``), and submitit's folder without the ``%j``
    that would leave an empty folder of that name in every sweep; none for a single run."""
    if not jobs or not is_sweep(args, jobs[0]):
        return []
    parsed = typos.check_syntax(args)
    given = {o.key_or_group for o in parsed}
    shared = [o.key_or_group for o in parsed if not o.is_sweep_override()]
    naming = "hydra.job.config.override_dirname.exclude_keys"
    exclude = list(dict.fromkeys([*OmegaConf.select(jobs[0], naming), *shared]))
    found = {
        "hydra.sweep.dir": str(jobs[0].hydra.sweep.dir),
        naming: f"[{','.join(repr(k) for k in exclude)}]",
    }
    submitit = "hydra.launcher.submitit_folder"
    if str(jobs[0].hydra.launcher.get("submitit_folder", "")).endswith("/%j"):
        found[submitit] = f"{found['hydra.sweep.dir']}/.submitit"
    quoted = ("hydra.sweep.dir", submitit)
    return [typos.quote_path(f"{key}={value}", quoted) for key, value in found.items() if key not in given]


def jobs_of(args: Sequence[str], config_dir: str, config_name: str = "train") -> list[DictConfig]:
    """The config of every job of the command line, composed once each; none where Hydra alone reads it."""
    from hydra import initialize_config_dir

    flags.check_flags(args)
    typos.check_words(args)
    parsed = typos.check_syntax(args)
    if {a.split("=", 1)[0] for a in args if a.startswith("-")} & typos.NOT_COMPOSED:
        return []
    values.check_search_path(parsed)
    with hydra_warnings.refused(), initialize_config_dir(config_dir=config_dir, version_base="1.3"):
        jobs = compose_jobs(args, parsed, config_name)
        values.check_switches(jobs, lambda job: composed(config_name, job))
        return jobs


def sweep_values(override: Any) -> list[str]:
    """A swept override's values as written; none for a range the sweeper expands itself."""
    try:
        return list(override.sweep_string_iterator())
    except Exception:
        return []


def compose_jobs(args: Sequence[str], parsed: Sequence[Any], config_name: str) -> list[DictConfig]:
    """Every combination of a basic sweep's values, else the first job (a sweeper that picks its jobs as it goes).
    The basic sweeper's jobs are its config's ``hydra.sweeper.params`` (``experiment=diagnostics``: five data sets)
    and the command line's values, which win for a key both set, one value list per key in the order keys first
    appear, as that sweeper makes them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    lists = value_lists(parsed)
    swept = any(o.is_sweep_override() for o in parsed)
    # a run applies every override in turn (a key given twice is refused); a sweep's jobs take each key once
    first = [each[0] for each in lists if each] if swept else [o.input_line for o in parsed]
    cfg = composed(config_name, first, sweep=swept)
    if swept and not is_sweep(args, cfg):
        given = next(o.input_line for o in parsed if o.is_sweep_override())
        raise AttnexpError(
            f"{given} gives several values, which makes a sweep (a run of each): add --multirun (-m) to run them, "
            f"or give one value (a list as one value is written key=[a,b]). {NOTHING}"
        )
    params = OmegaConf.select(cfg, "hydra.sweeper.params", default=None) or {}
    if params and is_sweep(args, cfg):
        parsed = [*OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()]), *parsed]
        lists = value_lists(parsed)
        first, swept = [each[0] for each in lists if each], True
        cfg = composed(config_name, first, sweep=True)
    if not swept or not str(cfg.hydra.sweeper.get("_target_", "")).endswith("BasicSweeper") or not all(lists):
        return [cfg]
    jobs = [list(job) for job in itertools.product(*lists)]
    return [cfg if job == first else composed(config_name, job, sweep=True) for job in jobs]


def value_lists(parsed: Sequence[Any]) -> list[list[str]]:
    """Each key's overrides as a list of its values (one for a plain override, none for a sweep the sweeper expands
    itself); a key set again replaces its values where it first stood."""
    by_key: dict[str, list[str]] = {}
    for o in parsed:
        key = o.get_key_element()
        by_key[key] = [f"{key}={v}" for v in sweep_values(o)] if o.is_sweep_override() else [o.input_line]
    return list(by_key.values())


def composed(config_name: str, job: list[str], sweep: bool = False) -> DictConfig:
    from hydra import compose

    try:
        return compose(config_name, overrides=job, return_hydra_config=True)
    except Warning:  # one of Hydra's, an error while composing (:func:`hydra_warnings.refused`)
        raise
    except Exception as err:
        told = typos.explain(err, job, config_name)
        if sweep:
            told = (
                f"In the sweep's job {' '.join(job)}: {told.removesuffix(NOTHING)}Every job of a sweep gets every key "
                f"the command sets: sweep together the options that take it, and the others in a sweep of their own. "
                f"{NOTHING}"
            )
        raise AttnexpError(told) from None


def is_sweep(args: Sequence[str], cfg: Any) -> bool:
    """``--multirun`` (``-m``), or ``hydra.mode: MULTIRUN`` in the config (which ``--cfg`` and ``--info`` ignore)."""
    flags = {a.split("=", 1)[0] for a in args if a.startswith("-")}
    configured = str(OmegaConf.select(cfg, "hydra.mode")) == "RunMode.MULTIRUN"
    return bool(flags & {"-m", "--multirun"}) or (configured and not flags & {"-c", "--cfg", "-i", "--info"})


def check_launcher(launcher: DictConfig) -> None:
    """``hydra.launcher.n_jobs`` must be a count joblib takes; ``hydra/launcher=slurm`` needs SLURM's ``sbatch``."""
    target, n_jobs = str(launcher.get("_target_", "")), launcher.get("n_jobs")
    if target.endswith("JoblibLauncher") and (isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0):
        raise AttnexpError(
            f"hydra.launcher.n_jobs={n_jobs!r} is not allowed: it is how many sweep jobs run at once, a positive "
            "integer, or -1 for one per core. E.g. hydra.launcher.n_jobs=2, or hydra/launcher=basic to run the jobs "
            f"one after the other. {NOTHING}"
        )
    if target.endswith("SlurmLauncher") and shutil.which("sbatch") is None:
        raise AttnexpError(
            "hydra/launcher=slurm submits each job to a SLURM cluster with sbatch, which is not on this machine's "
            "PATH. Run the sweep on the cluster's login node, or here with the default launcher (jobs side by side) "
            f"or hydra/launcher=basic (one after the other). {NOTHING}"
        )


def check_build(cfg: DictConfig) -> Any:
    """No GPU asked for where there is none; the objects build (:func:`attnexp.cli.build.check`); a checkpoint to train
    from fits the network. The network (meta device), or None where the user's own code failed to build it."""
    import torch

    accelerator = str(OmegaConf.select(cfg, "trainer.accelerator", default="auto"))
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise AttnexpError(
            f"trainer.accelerator={accelerator} asks for a GPU, but PyTorch sees none on this machine (torch "
            f"{torch.__version__}). Use trainer=cpu, or trainer=default to pick whatever accelerator is present."
        )
    try:
        net = build.check(cfg)
    except TypeError as err:  # an option added with '+' that its class does not take (+model.kernal_q=3)
        raise AttnexpError(typos.misspelt_option(cfg, err) or f"{type(err).__name__}: {err}. {NOTHING}") from None
    if net is not None:
        values.check_monitors(cfg, net.num_classes)
        values.check_validation_interval(cfg, data_of_run.checked(cfg))
    if cfg.get("ckpt_path") and net is not None:
        from attnexp.training.callbacks.checkpoints import check_checkpoint

        check_checkpoint(cfg.ckpt_path, torch.nn.ModuleDict({"net": net}), f"ckpt_path={cfg.ckpt_path}")
    return net


def check_trainer(cfg: DictConfig) -> None:
    """Build the Trainer the config names with Lightning's own checks of its arguments, as the run will but quietly and
    writing nothing: no logger or callbacks, a throwaway root folder, torch's global switches (``deterministic``,
    ``benchmark``) left for the run's Trainer to set."""
    import tempfile
    import warnings

    from hydra.utils import instantiate

    with (
        tempfile.TemporaryDirectory() as scratch,
        warnings.catch_warnings(),
        console.quiet(logging.ERROR, *console.LIBRARIES),
    ):
        warnings.simplefilter("ignore")
        try:
            instantiate(
                cfg.trainer,
                logger=False,
                callbacks=[],
                default_root_dir=scratch,
                deterministic=None,
                benchmark=None,
                _convert_="all",  # as the run builds it
            )
        except Exception as err:
            cause = root_cause(err)  # +trainer.foo=1: an argument the Trainer does not take, named with its options
            told = typos.misspelt_option(cfg, cause) if isinstance(cause, TypeError) else None
            raise AttnexpError(told or trainer_refused(cfg, cause)) from None


def trainer_refused(cfg: DictConfig, err: BaseException) -> str:
    """The paragraph for a Trainer argument Lightning refuses: the overrides that set it, and Lightning's reason."""
    text = " ".join(str(err).split()).rstrip(".")
    given = [o for o in cfg.hydra.overrides.task if typos.keyed(o).split(".")[0] == "trainer"]
    named = [o for o in given if typos.keyed(o).rpartition(".")[2].lower() in text.lower()]
    named = named or [o for o in given if f"'{o.partition('=')[2]}'" in text] or given  # Timer(duration='1:2')
    what = (
        f"{' '.join(named)} {'is' if len(named) == 1 else 'are'} not allowed"
        if named
        else "The trainer's settings do not work"
    )
    return (
        f"{what}: Lightning's Trainer refuses {'it' if len(named) == 1 else 'them'} ({type(err).__name__}: {text}). "
        f"The trainer.* keys are the arguments of {cfg.trainer.get('_target_')}: fix the value (attnexp --cfg job "
        f"shows the ones the config sets). {NOTHING}"
    )
