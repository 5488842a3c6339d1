"""The files of a comparison: summary.md, summary.csv, runs.csv, summary.tex and plots, written only over files
that a comparison wrote (they are listed in the folder's ``.attnexp-summary``)."""

from __future__ import annotations

import csv
import os
from pathlib import Path

from attnexp.comparison import suite
from attnexp.comparison.fairness import still_improving
from attnexp.comparison.latex import latex
from attnexp.comparison.plots import (
    PROFILE,
    knob_file,
    metric_file,
    plot,
    plot_knob,
    plot_profile,
    plot_search,
    search_file,
)
from attnexp.comparison.render import grid_note, markdown
from attnexp.comparison.runs import Run
from attnexp.comparison.suite import seed_order
from attnexp.comparison.summary import Comparison
from attnexp.runs import metrics_file

OUTPUTS = ("summary.md", "summary.csv", "runs.csv", "summary.tex")
MANIFEST = ".attnexp-summary"


class OverwriteError(Exception):
    """The output folder holds a file of the same name that no comparison wrote."""


def ours_or_empty(out: Path) -> None:
    """Refuse an output folder that holds files but no comparison's (``attnexp-compare --out``): its files are the
    user's, and a summary among them would be lost or mistaken for theirs; or a path through a file, which holds no
    folder."""
    file = next((p for p in (out, *out.parents) if os.path.exists(p) and not os.path.isdir(p)), None)
    if file is not None:
        raise OverwriteError(
            f"--out {out} {'is' if file == out else f'lies under {file}, which is'} a file, not a folder (a summary is "
            "several files); nothing was written. Give a new or empty folder, or the folder of an earlier comparison."
        )
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise OverwriteError(
            f"--out {out} holds files that no comparison wrote; nothing was written. Give a new or empty folder, "
            "or the folder of an earlier comparison (its files are replaced)."
        )


def write_all(c: Comparison, out: Path) -> list[Path]:
    """Write every file of ``c`` into ``out``; return their paths. Refuses to replace a file not written by a
    comparison."""
    names = [*OUTPUTS, *plot_names(c)]
    out.mkdir(parents=True, exist_ok=True)
    ours = set((out / MANIFEST).read_text().split()) if (out / MANIFEST).is_file() else set()
    foreign = [n for n in names if (out / n).exists() and n not in ours]
    if foreign:
        raise OverwriteError(
            f"{out} already holds {', '.join(foreign)}, which no comparison wrote; nothing was written. "
            "Choose another folder with --out."
        )
    (out / MANIFEST).write_text("\n".join(sorted(ours | set(names))) + "\n")
    (out / "summary.md").write_text(markdown(c))
    write_summary_csv(c, out / "summary.csv")
    write_runs_csv(c.runs + [t.run for t in c.search.trials] if c.search else c.runs, out / "runs.csv")
    (out / "summary.tex").write_text(latex(c))
    if c.suite:
        write_csv(suite.csv_rows(c.suite), out / "data.csv")
    for t in c.tables:
        plot(t, out)
        for key in suite.knobs(t.runs, t.tune):
            plot_knob(t, key, out)
    if profiled(c):
        plot_profile(c, out)
    for key in c.search.keys if c.search else []:
        plot_search(c.search, key, out)  # type: ignore[arg-type]  # there is a search where there are keys
    return [out / n for n in names]


def profiled(c: Comparison) -> bool:
    return bool(c.suite and c.suite.aggregates and c.suite.aggregates.scores)


def plot_names(c: Comparison) -> list[str]:
    names = []
    for t in c.tables:
        names += [metric_file(t, m) for m in t.metrics if m.startswith("test/")] + [f"{t.prefix}val_curves.png"]
        names += [knob_file(t, key) for key in suite.knobs(t.runs, t.tune)]
    names += [search_file(key) for key in c.search.keys] if c.search else []
    return names + (["data.csv"] if c.suite else []) + ([PROFILE] if profiled(c) else [])


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)


def write_summary_csv(c: Comparison, path: Path) -> None:
    """One row per configuration (and per tuned configuration, marked in ``table``), ``data`` naming the comparison's
    table (task and data set) it belongs to."""
    metrics = list(dict.fromkeys(m for t in c.tables for m in t.metrics))
    fields = ["table", "data", "config", "tuned", "tuned_over", "n", "runs"]
    for m in metrics:
        fields += [
            f"{m} {k}"
            for k in (
                "mean",
                "std",
                "ci_low",
                "ci_high",
                "missing",
                "diff",
                "diff_low",
                "diff_high",
                "test",
                "unpaired",
                "p",
                "p_adjusted",
                "margin",
                "p_equivalent",
                "p_equivalent_adjusted",
                "seeds_to_decide",
                "verdict",
            )
        ]
    fields += ["params", "seconds_per_epoch", "parallel_jobs", "still_improving", "status"]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        parts = [(t, k, r) for t in c.tables for k, r in (("all", t.rows), ("tuned", t.tuned))]
        for part, table, rows in parts:
            for row in rows:
                out = {
                    "table": table,
                    "data": part.label,
                    "config": row.config,
                    "tuned": row.tuned,
                    "tuned_over": grid_note(row),
                    "n": len(row.ok),
                    "runs": len(row.runs),
                    "params": row.params,
                    "seconds_per_epoch": row.mean_of("seconds_per_epoch"),
                    "parallel_jobs": max((int(r.metrics.get("parallel_jobs") or 1) for r in row.ok), default=1),
                    "still_improving": still_improving(row),
                    "status": row.status,
                }
                for m in part.metrics:
                    s, d = row.spreads[m], row.diffs.get(m)
                    out.update(
                        {
                            f"{m} mean": s.mean,
                            f"{m} std": s.std,
                            f"{m} ci_low": s.low,
                            f"{m} ci_high": s.high,
                            f"{m} missing": " ".join(f"{k}:{v}" for k, v in row.missing.get(m, {}).items()),
                            f"{m} verdict": row.verdicts.get(m, ""),
                        }
                    )
                    if d is not None:
                        out.update(
                            {
                                f"{m} diff": d.mean,
                                f"{m} diff_low": d.low,
                                f"{m} diff_high": d.high,
                                f"{m} test": d.test,
                                f"{m} unpaired": " ".join(d.unpaired),
                                f"{m} p": d.p,
                                f"{m} p_adjusted": d.p_adjusted,
                                f"{m} margin": d.margin,
                                f"{m} p_equivalent": d.p_equivalent,
                                f"{m} p_equivalent_adjusted": d.p_equivalent_adjusted,
                                f"{m} seeds_to_decide": d.seeds,
                                f"{m} verdict": row.verdicts[m],
                            }
                        )
                writer.writerow(out)


def write_runs_csv(runs: list[Run], path: Path) -> None:
    """One row per run: its configuration, seed, folder, status, identity and every final metric of its
    metrics.json."""
    metrics = sorted(
        {
            k
            for r in runs
            for k in metrics_file.final_metrics({k: v for k, v in r.metrics.items() if isinstance(v, (int, float))})
        }
    )
    fields = [
        "config",
        "seed",
        "folder",
        "status",
        "mixer",
        "data",
        "path",
        "params",
        "epochs",
        "seconds_per_epoch",
        "parallel_jobs",
        "still_improving",
        "identity",
        *metrics,
    ]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for run in sorted(runs, key=lambda r: (r.config(), seed_order(r.seed))):
            writer.writerow(
                {
                    **run.metrics,
                    "mixer": metrics_file.mixer(run.metrics),
                    "config": run.config(),
                    "seed": run.seed,
                    "folder": str(run.folder.resolve()),
                }
            )
