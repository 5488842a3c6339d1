"""Which earlier run ``resume=true`` continues: the newest one that ran the same settings (the fingerprint) with the
same seed, whatever options that cannot change the method it was given (``threads=1``, ``paths.log_dir``); and,
where none did, the nearest earlier runs with how they differ. A run is continued only with the settings and the
mixer source it started with."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from attnexp.errors import AttnexpError
from attnexp.runs import metrics_file
from attnexp.runs.fingerprint import NOT_METHOD, config_record, differences, fingerprint, flat, left_out, method

SHOWN = 3  # nearest earlier runs named when none matches


def comparable_overrides(overrides: Iterable[Any]) -> list[str]:
    """A command line's overrides as a resume compares them: those that can change the method, sorted (Hydra's own,
    such as ``hydra/launcher=basic``, are not the run's: a sweep's ``multirun.yaml`` keeps them apart)."""
    keys = ((str(o), str(o).lstrip("+~").split("=", 1)[0]) for o in overrides)
    return sorted(o for o, key in keys if not key.startswith(("hydra.", "hydra/")) and not left_out(key, NOT_METHOD))


def recorded_settings(record: dict[str, Any]) -> dict[str, Any] | None:
    """A record's settings as the current rules see them (None for a record of an earlier version without them)."""
    return method(record["config"]) if isinstance(record.get("config"), dict) else None


def compared(settings: dict[str, Any], seed: Any) -> dict[str, str]:
    """Settings as two runs are compared: flat (:func:`attnexp.runs.fingerprint.flat`), with the seed."""
    return flat(settings) | {"seed": str(seed)}


def run_folders(root: str | Path) -> list[Path]:
    """The run folders under ``root`` (holding a record and Hydra's files), newest first."""
    found = [p.parent for p in Path(root).rglob(metrics_file.FILE) if (p.parent / ".hydra").is_dir()]
    return sorted(found, key=lambda f: metrics_file.path(f).stat().st_mtime, reverse=True)


def matching_run(root: str | Path, cfg: DictConfig, overrides: Iterable[Any]) -> str | None:
    """The newest run folder under ``root`` whose record has the settings and seed of ``cfg`` (a composed config,
    Hydra's node aside); for records of earlier versions, the same command-line overrides, as they were found then."""
    wanted = fingerprint(config_record(cfg, leave_out=NOT_METHOD))
    seed = OmegaConf.select(cfg, "seed", default=None)
    typed = comparable_overrides(overrides)
    for folder in run_folders(root):
        record = metrics_file.read(folder)
        settings = recorded_settings(record)
        if settings is not None:
            if fingerprint(settings) == wanted and record.get("seed") == seed:
                return str(folder)
        elif comparable_overrides(OmegaConf.load(folder / ".hydra" / "overrides.yaml")) == typed:
            return str(folder)
    return None


def nearest(root: str | Path, config: dict[str, Any], shown: int = SHOWN) -> list[str]:
    """The earlier runs under ``root`` whose settings and seed differ from ``config``'s (a recorded config) in the
    fewest keys, newest first among equals, each with how it differs: ``folder (trainer.max_epochs 5 there, 10
    here)``."""
    here = compared(method(config), config.get("seed"))
    ranked = []
    for i, folder in enumerate(run_folders(root)):
        record = metrics_file.read(folder)
        settings = recorded_settings(record)
        if settings is not None:
            differ = differences(here, compared(settings, record.get("seed")))
            ranked.append((len(differ), i, folder, differ))
    lines = []
    for _, _, folder, differ in sorted(ranked)[:shown]:
        listed = ", ".join(f"{key} {b} there, {a} here" for key, (a, b) in list(differ.items())[:4])
        lines.append(f"{folder} ({listed}{', ...' if len(differ) > 4 else ''})")
    return lines


def check_same_settings(folder: str | Path, config: dict[str, Any]) -> None:
    """A run folder continued by ``resume=true`` (a sweep job's, found by its name) must hold a run of the same
    settings and seed: continuing another would mix two configurations in one record."""
    record = metrics_file.read(folder)
    settings = recorded_settings(record)
    if settings is None:
        return
    differ = differences(compared(method(config), config.get("seed")), compared(settings, record.get("seed")))
    if differ:
        listed = "; ".join(f"{key} {b} there, {a} now" for key, (a, b) in list(differ.items())[:6])
        raise AttnexpError(
            f"{folder} holds a run of other settings ({listed}), so resume=true cannot continue it there: "
            "its record and checkpoints would mix two configurations. A config file or a default has "
            "changed since that run started: restore it to continue, or run without resume=true."
        )


def check_same_sources(folder: str | Path, mixers: dict[str, dict[str, Any]]) -> None:
    """A run continued by ``resume=true`` must run the mixer source it started with (``mixers``: now, as
    :func:`attnexp.runs.provenance.mixer_sources` gives them): continuing with another would record one version for
    epochs that two versions trained."""
    before = metrics_file.read(folder).get("mixers")
    if not isinstance(before, dict):  # a record of an earlier version, or of a run stopped before it built its network
        return
    now = {name: str(entry.get("sha256")) for name, entry in mixers.items()}
    then = {name: str((entry or {}).get("sha256")) for name, entry in before.items()}
    files = {name: (entry or {}).get("file") for name, entry in {**before, **mixers}.items()}
    changed = [
        f"{name} in {files[name]}: {was} there, {current} now"
        for name, (current, was) in differences(now, then).items()
    ]
    if changed:
        raise AttnexpError(
            f"{folder} holds a run of another version of its mixer's source ({'; '.join(changed)}), so "
            "resume=true cannot continue it: its checkpoints were trained by the code it started with, "
            "and its record would name only one version. Restore that source to continue, or run without "
            "resume=true: a new run, which comparisons tell apart by its source."
        )


def fresh_start(root: str | Path, config: dict[str, Any]) -> str:
    """What a resumed run that found nothing to continue says: the nearest earlier runs and how they differ."""
    found = nearest(root, config)
    text = f"Nothing to resume: no earlier run under {root} has these settings and seed; starting fresh."
    return text + (" Nearest: " + "; ".join(found) + "." if found else "")
