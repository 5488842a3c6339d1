"""Hyperparameter searches (``hparams_search=optuna``): each trial is one setting tried once, so trials are ranked by
the search's objective, not compared with a baseline as if they were configurations over seeds. Read from the trials'
records alone."""

from __future__ import annotations

import math
from dataclasses import dataclass

from attnexp.comparison.runs import Run

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
        overrides = dict(o.lstrip("+~").split("=", 1) for o in self.best.run.overrides if "=" in o)
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


def is_trial(run: Run) -> bool:
    """Whether ``run`` is a trial of a hyperparameter search: its record chose an ``hparams_search`` option."""
    return str((run.metrics.get("choices") or {}).get("hparams_search")) not in ("None", "null")


def objective(run: Run) -> tuple[str, bool]:
    """The metric a search trial optimised (``optimized_metric``) and whether higher is better (its task's direction
    for it, else its checkpoint metric's, else higher)."""
    metric = str((run.metrics.get("config") or {}).get("optimized_metric") or "val/acc_best")
    mode = dict(run.metrics.get("summary") or []).get(metric)
    if mode is None and metric.startswith(str(run.metrics.get("monitor"))):
        mode = run.metrics.get("mode")
    return metric, mode != "min"


def search(runs: list[Run]) -> Search | None:
    """The trials among ``runs`` ranked by their objective, or None when no run is a trial. The searched keys are
    those whose overrides differ between the trials (all a single trial's, seed and groups aside)."""
    trials = [r for r in runs if is_trial(r)]
    if not trials:
        return None
    given = [dict(o.lstrip("+~").split("=", 1) for o in r.overrides if "=" in o) for r in trials]
    names = list(dict.fromkeys(k for g in given for k in g if k not in (*LEFT_OUT_OF_RERUN, "model", "data")))
    keys = [k for k in names if len({g.get(k) for g in given}) > 1] or (names if len(trials) == 1 else [])
    metric, maximize = objective(trials[0])
    ranked = []
    for run, overrides in zip(trials, given):
        value = run.metrics.get(metric)
        score = float(value) if isinstance(value, (int, float)) and run.ok else math.nan
        run.settings = {**{k: overrides[k] for k in keys if k in overrides}, "seed": str(run.metrics.get("seed"))}
        ranked.append(Trial(run, {k: overrides[k] for k in keys if k in overrides}, score))
    ranked.sort(key=lambda t: (not math.isfinite(t.objective), -t.objective if maximize else t.objective))
    return Search(metric, maximize, keys, ranked, [r for r in runs if not is_trial(r)])
