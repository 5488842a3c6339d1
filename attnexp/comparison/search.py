"""Hyperparameter searches (the Optuna sweeper): each trial is one setting tried once, so trials are ranked by the
search's objective, not compared with a baseline as if they were configurations over seeds."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import yaml

from attnexp.comparison.runs import Run

SEARCH_SWEEPERS = ("optuna",)  # a run whose Hydra sweeper's target names one of these is a search trial
LEFT_OUT_OF_RERUN = ("hparams_search", "seed", "resume")


@dataclass
class Trial:
    run: Run
    values: dict[str, str]  # searched key -> the value tried (as the run's overrides wrote it)
    objective: float  # nan when the run recorded none


@dataclass
class Search:
    """Trials best first (those without an objective last), and the runs that are not trials."""

    objective: str  # the metric the search optimised (optimized_metric)
    maximize: bool
    keys: list[str]
    trials: list[Trial]
    others: list[Run]

    @property
    def best(self) -> Trial | None:
        return self.trials[0] if self.trials and math.isfinite(self.trials[0].objective) else None

    def rerun(self, seeds: str = "0,1,2", baseline: str = "dot") -> str:
        """The command that runs the best trial's setting (values rounded) over seeds next to the baseline mixer."""
        if self.best is None:
            return ""
        overrides = dict(o.lstrip("+~").split("=", 1) for o in overrides_of(self.best.run) if "=" in o)
        mixer = overrides.pop("model", str(self.best.run.metrics.get("mixer")))
        kept = [f"{k}={rounded(v)}" for k, v in overrides.items() if k not in LEFT_OUT_OF_RERUN]
        mixers = mixer if mixer == baseline else f"{mixer},{baseline}"
        return " ".join(["attnexp --multirun", f"model={mixers}", *kept, f"seed={seeds}"])


def rounded(value: str) -> str:
    """A float with 3 significant digits (``0.0007247031607588866`` -> ``0.000725``); anything else as it is."""
    try:
        number = float(value)
    except ValueError:
        return value
    return value if value.lstrip("-").isdigit() or not math.isfinite(number) else f"{number:.3g}"


def overrides_of(run: Run) -> list[str]:
    file = run.folder / ".hydra" / "overrides.yaml"
    return list(yaml.safe_load(file.read_text()) or []) if file.is_file() else []


def searched(run: Run) -> tuple[list[str], str, bool] | None:
    """The keys a search sweeper varied, its objective and whether it maximises, if ``run`` is one of its trials."""
    saved = run.folder / ".hydra"
    if not (saved / "hydra.yaml").is_file():
        return None
    sweeper = (yaml.safe_load((saved / "hydra.yaml").read_text()) or {}).get("hydra", {}).get("sweeper") or {}
    if not any(name in str(sweeper.get("_target_", "")).lower() for name in SEARCH_SWEEPERS):
        return None
    config = yaml.safe_load((saved / "config.yaml").read_text()) if (saved / "config.yaml").is_file() else {}
    direction = sweeper.get("direction", "maximize")
    direction = direction[0] if isinstance(direction, list) else direction
    return (
        list(sweeper.get("params") or {}),
        (config or {}).get("optimized_metric") or "val/acc_best",
        str(direction) != "minimize",
    )


def search(runs: list[Run]) -> Search | None:
    """The trials among ``runs`` ranked by their objective, or None when no run is a trial."""
    found = {id(r): s for r in runs if (s := searched(r))}
    trials = [r for r in runs if id(r) in found]
    if not trials:
        return None
    keys = list(dict.fromkeys(k for r in trials for k in found[id(r)][0]))
    objective, maximize = found[id(trials[0])][1], found[id(trials[0])][2]
    ranked = []
    for run in trials:
        overrides = dict(o.lstrip("+~").split("=", 1) for o in overrides_of(run) if "=" in o)
        value = run.metrics.get(objective)
        score = float(value) if isinstance(value, (int, float)) and run.ok else math.nan
        ranked.append(Trial(run, {k: overrides[k] for k in keys if k in overrides}, score))
    ranked.sort(key=lambda t: (not math.isfinite(t.objective), -t.objective if maximize else t.objective))
    return Search(objective, maximize, keys, ranked, renamed([r for r in runs if id(r) not in found]))


def renamed(runs: list[Run]) -> list[Run]:
    """``runs`` named by the settings that vary among them alone (the trials left aside), the mixer by default."""
    keys = {k for r in runs for k in r.settings} - {"seed"}
    varying = [k for k in sorted(keys) if len({r.settings.get(k) for r in runs}) > 1] or ["model"]
    return [
        dataclasses.replace(r, settings={k: r.settings[k] for k in [*varying, "seed"] if k in r.settings}) for r in runs
    ]
