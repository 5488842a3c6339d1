"""Each configuration at its own best setting of the tuned keys (``compare.tune``, the learning rate by default), picked
on validation, with the grid it was picked from: configurations tuned over different grids are not compared."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from attnexp.comparison.runs import Run
from attnexp.comparison.tables import Row, baseline_spec, fill, group, named_baseline, natural


def grid(rows: list[Row], keys: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The values of ``keys`` that the rows (one per tuned value) tried, in natural order."""
    return {k: tuple(sorted({r.named[k] for r in rows if k in r.named}, key=natural)) for k in keys}


def tuned_rows(
    runs: list[Run],
    keys: list[str],
    metrics: dict[str, str],
    baseline: str | None,
    given: Mapping[str, float] | None = None,
    ignore: Sequence[str] = (),
) -> tuple[list[Row], str, str]:
    """Each configuration (tuned keys aside) at the tuned values whose runs have the best mean ``monitor_best`` (the
    task's checkpoint metric: best val/acc, or lowest val/loss for next tokens); rows named without the tuned keys,
    each with the grid its value was picked from."""
    if not keys:
        return [], "", ""
    chosen = []
    for outer in group(runs, keys):
        candidates = group(outer.runs)
        modes = {r.metrics.get("mode", "max") for r in outer.runs}
        sign = -1.0 if modes == {"min"} else 1.0
        scored = [
            (sign * c.mean_of("monitor_best"), c) for c in candidates if not math.isnan(c.mean_of("monitor_best"))
        ]
        if not scored:
            continue
        best = max(scored, key=lambda pair: pair[0])[1]
        setting = best.named
        chosen.append(
            Row(
                outer.config,
                best.runs,
                tuned=", ".join(f"{k}={setting[k]}" for k in keys if k in setting),
                named=outer.named,
                grid=grid([c for _, c in scored], keys),
                members=outer.runs,
            )
        )
    monitors = sorted(
        {
            f"{r.metrics.get('monitor', 'val/acc')} ({'lowest' if r.metrics.get('mode') == 'min' else 'highest'})"
            for r in runs
        }
    )
    rule = (
        f"for each configuration, the value of {', '.join(keys)} whose runs have the best mean validation score "
        f"{' / '.join(monitors)} of the checkpoint each run tested; the test metrics are those runs'. Each row shows "
        "the grid its value was picked from; configurations tuned over different grids are not compared"
    )
    wanted = ",".join(s for s in (baseline or "").split(",") if s and s.split("=")[0] not in keys)  # its other settings
    spec = baseline_spec(chosen, wanted or None)
    fill(chosen, metrics, spec, given, ignore, wanted)
    return chosen, rule, named_baseline(chosen, spec, wanted)
