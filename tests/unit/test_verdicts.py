"""Verdicts that survive a reviewer: missing values, negligible differences, repeated seeds, pairing on the common
seeds, many comparisons at once, intervals within bounds and linked seeds, and searches ranked, not compared."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from run_records import record as run_record
from scipy import stats as sp
from statsmodels.stats.multitest import multipletests

from attnexp.cli.compare import main
from attnexp.comparison import plots
from attnexp.comparison.naming import find_runs
from attnexp.comparison.stats import difference, spread
from attnexp.comparison.summary import compare


def record(root, name: str, mixer: str, seed: int, acc: float, overrides=(), **fields) -> None:
    """A finished run folder named ``name`` under ``root``, as a sweep over ``model`` and ``seed`` writes it (with
    ``overrides``, numbers, set in its config too)."""
    changes = {k: int(v) if v.isdigit() else float(v) for k, v in (o.split("=", 1) for o in overrides)}
    run_record(root, name, mixer, seed, acc, overrides=list(overrides), changes=changes, **fields)


def euclid_row(text: str, metric: str = "test/acc") -> str:
    return next(line for line in text.split(f"### {metric}")[1].splitlines() if line.startswith("| model=euclid"))


def test_a_nan_or_infinite_metric_is_missing_and_named_not_a_crash(tmp_path, capsys):
    for seed in range(3):
        record(tmp_path / "runs", f"dot/{seed}", "dot", seed, 0.80 + 0.01 * seed)
        loss = {1: math.nan, 2: math.inf}.get(seed, 0.3)
        record(tmp_path / "runs", f"euclid/{seed}", "euclid", seed, 0.82 + 0.01 * seed, **{"test/loss": loss})
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "cmp")]) == 0
    row = euclid_row(capsys.readouterr().out, "test/loss")
    assert row.startswith("| model=euclid | 1 + seed 1: nan, seed 2: inf | 0.3000 |"), row
    written = {r["config"]: r for r in csv.DictReader((tmp_path / "cmp" / "summary.csv").open())}
    assert written["model=euclid"]["test/loss missing"] == "1:nan 2:inf" and float(
        written["model=euclid"]["test/acc mean"]
    ) == pytest.approx(0.83)
    assert spread([0.5, math.nan, 0.7]).n == 2 and spread([0.5, math.nan, 0.7]).mean == pytest.approx(0.6)


def test_a_significant_but_negligible_difference_is_equivalent_not_better(tmp_path, capsys):
    right = (1800, 1805, 1809)  # of 2000 test examples; the other mixer gets one more right on every seed
    for seed, n in enumerate(right):
        record(tmp_path / "runs", f"dot/{seed}", "dot", seed, float(np.float32(n / 2000)))
        record(tmp_path / "runs", f"euclid/{seed}", "euclid", seed, float(np.float32((n + 1) / 2000)))
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "cmp")]) == 0
    row = euclid_row(capsys.readouterr().out)
    margin = math.sqrt(0.9023 * (1 - 0.9023) / 2000)  # one standard error of the baseline's accuracy at 2000 examples
    assert f"equivalent within ±{margin:.3g}" in row and "better" not in row, row
    c = compare(find_runs([tmp_path / "runs"]))
    d = next(r for r in c.rows if r.config == "model=euclid").diffs["test/acc"]
    assert d.p < 1e-6 and d.margin == pytest.approx(margin, rel=1e-3) and d.p_equivalent < 0.05


def test_repeated_seeds_are_refused_with_the_folders_named(tmp_path, capsys):
    for sweep in ("first", "second"):
        for seed in range(3):
            record(tmp_path / sweep, f"dot/{seed}", "dot", seed, 0.8)
            record(tmp_path / sweep, f"euclid/{seed}", "euclid", seed, 0.7 if sweep == "first" else 0.9)
    assert main([str(tmp_path / "first"), str(tmp_path / "second"), "--out", str(tmp_path / "cmp")]) == 2
    err = capsys.readouterr().err
    assert (
        "model=euclid seed 0 in" in err
        and str(tmp_path / "first" / "euclid" / "0") in err
        and str(tmp_path / "second" / "euclid" / "0") in err
    )
    assert "not another replicate" in err and not (tmp_path / "cmp" / "summary.md").exists()
    assert main([str(tmp_path / "second"), "--out", str(tmp_path / "cmp")]) == 0  # one sweep alone is fine


def test_a_missing_seed_pairs_the_common_seeds_and_names_the_other():
    base = {"0": 0.80, "1": 0.82, "2": 0.78}
    other = {"0": 0.79, "1": 0.80}  # seed 2 did not run
    d = difference(base, other)
    paired = sp.ttest_rel([0.79, 0.80], [0.80, 0.82])
    assert d.test == "paired t" and d.n == 2 and d.unpaired == ("2",) and d.p == pytest.approx(paired.pvalue)
    assert d.mean == pytest.approx(-0.015)
    assert difference({"0": 0.8, "1": 0.82}, {"1": 0.79, "2": 0.8}).test == "Welch t"  # one shared seed: no pairing


def test_p_values_are_holm_adjusted_over_the_family_and_verdicts_follow(tmp_path, capsys):
    gaps = {"a": 0.002, "b": 0.003, "c": 0.0, "d": -0.001, "e": 0.05}
    for seed in range(3):
        record(tmp_path / "runs", f"dot/{seed}", "dot", seed, 0.50 + 0.02 * seed)
        for name, gap in gaps.items():
            noise = (0.004, -0.003, 0.001)[seed] * (name != "c")
            record(tmp_path / "runs", f"{name}/{seed}", name, seed, 0.50 + 0.02 * seed + gap + noise)
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "cmp")]) == 0
    rows = [
        r
        for r in csv.DictReader((tmp_path / "cmp" / "summary.csv").open())
        if r["table"] == "all" and r["config"] != "model=dot"
    ]
    raw = [float(r["test/acc p"]) for r in rows]
    expected = multipletests(raw, method="holm")[1]
    assert [float(r["test/acc p_adjusted"]) for r in rows] == pytest.approx(list(expected))
    assert all(float(r["test/acc p_adjusted"]) >= float(r["test/acc p"]) for r in rows)
    worst = max(rows, key=lambda r: float(r["test/acc p_adjusted"]) / float(r["test/acc p"]))
    assert float(worst["test/acc p_adjusted"]) > float(worst["test/acc p"])
    e = next(r for r in rows if r["config"] == "model=e")
    assert float(e["test/acc p"]) < 0.05 and (e["test/acc verdict"] == "better") == (
        float(e["test/acc p_adjusted"]) < 0.05
    )
    assert "adjusted p" in capsys.readouterr().out


def test_one_comparison_can_lose_its_verdict_to_the_adjustment():
    from attnexp.comparison.stats import Difference, adjust, verdict

    family = [Difference("paired t", 3, 0.05, 0.01, 0.09, p) for p in (0.03, 0.04, 0.5)]
    assert [verdict(d, True) for d in family[:2]] == ["better", "better"]  # each alone
    adjusted = adjust(family)
    assert [d.p_adjusted for d in adjusted] == pytest.approx([0.09, 0.09, 0.5])
    assert [verdict(d, True).split(":")[0] for d in adjusted] == ["inconclusive"] * 3


def test_a_significant_difference_within_the_margin_is_no_better_before_equivalence_is_shown():
    """p < 0.05, but the difference (+0.004) lies within the margin (0.005) and two one-sided tests do not yet show
    it equivalent: inconclusive, with the seeds that would show equivalence; never better."""
    from attnexp.comparison.stats import adjust, verdict

    base = {str(i): 0.80 + 0.01 * i for i in range(5)}
    other = {k: v + gap for (k, v), gap in zip(base.items(), (0.001, 0.007, 0.004, 0.005, 0.003))}
    (d,) = adjust([difference(base, other, margin=0.005)])
    assert d.p_adjusted < 0.05 and d.p_equivalent_adjusted > 0.05 and d.mean == pytest.approx(0.004)
    assert d.seeds is not None and verdict(d, True) == f"inconclusive: about {d.seeds} seeds would show equivalence"


def test_an_inconclusive_verdict_says_how_many_seeds_would_decide():
    from statsmodels.stats.power import TTestPower

    d = difference({"0": 0.80, "1": 0.81, "2": 0.79}, {"0": 0.82, "1": 0.81, "2": 0.83}, margin=0.005)
    from attnexp.comparison.stats import adjust, verdict

    (d,) = adjust([d])
    diffs = np.array([0.02, 0.0, 0.04])
    wanted = TTestPower().solve_power(effect_size=diffs.mean() / diffs.std(ddof=1), alpha=0.05, power=0.8)
    assert (
        d.seeds == math.ceil(wanted)
        and verdict(d, True) == f"inconclusive: about {math.ceil(wanted)} seeds would show a difference"
    )


def test_intervals_stay_within_what_they_describe(tmp_path):
    for seed, (dot, euclid) in enumerate([(0.2, 0.25), (0.95, 1.0), (1.0, 0.9375)]):
        record(tmp_path, f"dot/{seed}", "dot", seed, dot)
        record(tmp_path, f"euclid/{seed}", "euclid", seed, euclid)
    rows = {r.config: r for r in compare(find_runs([tmp_path])).rows}
    wide = rows["model=dot"].spreads["test/acc"]
    assert wide.high == 1.0 and wide.low == 0.0 and 0 < wide.mean < 1  # Student t alone gives [-0.23, 1.39]
    same = difference({"0": 0.5, "1": 0.75}, {"0": 0.4375, "1": 0.6875})  # exact binary fractions: equal differences
    assert same.test == "sign" and math.isnan(same.low) and math.isnan(same.high)  # no zero-width interval


def test_the_bar_plot_links_each_seeds_values_across_mixers(tmp_path, monkeypatch):
    for seed in range(3):
        record(tmp_path, f"dot/{seed}", "dot", seed, 0.8 + 0.05 * seed)
        record(tmp_path, f"euclid/{seed}", "euclid", seed, 0.81 + 0.05 * seed)
    c = compare(find_runs([tmp_path]))
    drawn = []
    import matplotlib.axes

    real = matplotlib.axes.Axes.plot
    monkeypatch.setattr(
        matplotlib.axes.Axes, "plot", lambda ax, *a, **k: drawn.append([list(v) for v in a[:2]]) or real(ax, *a, **k)
    )
    (tmp_path / "out").mkdir()
    plots.plot(c.tables[0], tmp_path / "out")
    for seed in range(3):  # a line from the seed's dot value to its euclid value (the pairing the verdict uses)
        ys = [0.8 + 0.05 * seed, 0.81 + 0.05 * seed]
        assert any(len(y) == 2 and y == pytest.approx(ys) and x[1] - x[0] == pytest.approx(1) for x, y in drawn), drawn


def search_trial(root, number: int, lr: float, dim: int, objective: float) -> None:
    """A trial of ``hparams_search=optuna`` as its run folder holds it."""
    run_record(
        root,
        f"trial{number}",
        "euclid",
        0,
        objective - 0.01,
        overrides=["hparams_search=optuna", f"module.optimizer.lr={lr}", f"net.dim={dim}"],
        changes={"module.optimizer.lr": lr, "net.dim": dim, "optimized_metric": "val/acc_best"},
        chosen={"hparams_search": "optuna"},
        **{"val/acc_best": objective},
    )


def test_a_search_is_ranked_by_its_objective_not_compared_trial_by_trial(tmp_path, capsys):
    trials = [(0.0007247031607588866, 32, 0.91), (0.012345678, 16, 0.85), (0.0031, 64, 0.95), (0.02, 64, 0.60)]
    for i, (lr, dim, objective) in enumerate(trials):
        search_trial(tmp_path / "search", i, lr, dim, objective)
    out = tmp_path / "cmp"
    assert main([str(tmp_path / "search"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "### Search: 4 trials by val/acc_best (highest first)" in text and "Δ vs" not in text
    ranked = [line for line in text.splitlines() if line.startswith("| 1 (best) |") or line.startswith("| 2 |")]
    assert ranked == ["| 1 (best) | 0.0031 | 64 | 0.9500 | ok |", "| 2 | 0.000725 | 32 | 0.9100 | ok |"]
    assert "0.0007247031607588866" not in text
    assert "attnexp --multirun model=euclid,dot module.optimizer.lr=0.0031 net.dim=64 seed=0,1,2" in text
    for key in ("module.optimizer.lr", "net.dim"):
        assert (out / f"search_{key}.png").stat().st_size > 10_000
    assert not (out / "test_acc.png").exists() and len(list(csv.DictReader((out / "runs.csv").open()))) == 4
    # The rerun, summarised together with the search: the trials ranked, the rerun compared over seeds.
    for seed in range(2):
        for mixer in ("euclid", "dot"):
            record(
                tmp_path / "rerun",
                f"{mixer}/{seed}",
                mixer,
                seed,
                0.9 + 0.01 * seed + 0.02 * (mixer == "euclid"),
                overrides=["module.optimizer.lr=0.0031", "net.dim=64"],
            )
    assert main([str(tmp_path / "search"), str(tmp_path / "rerun"), "--out", str(tmp_path / "both")]) == 0
    both = capsys.readouterr().out
    assert "### Search: 4 trials" in both and "| model=euclid | 2 |" in both and "Baseline: model=dot" in both


def test_a_margin_given_decides_equivalence_and_a_bad_one_is_explained(tmp_path, capsys):
    for seed in range(4):
        record(tmp_path / "runs", f"dot/{seed}", "dot", seed, 0.80 + 0.01 * seed)
        record(
            tmp_path / "runs", f"euclid/{seed}", "euclid", seed, 0.80 + 0.01 * seed + (0.002, 0.004, 0.003, 0.001)[seed]
        )
    runs = find_runs([tmp_path / "runs"])
    verdicts = {
        m: next(r for r in compare(runs, margin={"test/acc": m}).rows if r.config == "model=euclid").verdicts[
            "test/acc"
        ]
        for m in (0.0001, 0.02)
    }
    assert verdicts == {
        0.0001: "better",
        0.02: "equivalent within ±0.02",
    }  # +0.0025: beyond the first, within the second
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "c"), "--margin", "test/acc=big"]) == 2
    assert "--margin 'test/acc=big' is not METRIC=VALUE" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_ignored_overrides_pool_runs_whose_budgets_were_matched_per_seed(tmp_path, capsys):
    """Dot trained for the epochs euclid reached on each seed (9 on seed 0, 10 on the others): one configuration
    with --ignore, paired with euclid's seeds; without it, seed 0 is a configuration of its own."""
    for seed in range(3):
        epochs = f"trainer.max_epochs={9 if seed == 0 else 10}"
        record(tmp_path / "dot", f"{seed}", "dot", seed, 0.80 + 0.01 * seed, overrides=[epochs])
        record(
            tmp_path / "euclid",
            f"{seed}",
            "euclid",
            seed,
            (0.75, 0.77, 0.76)[seed],
            overrides=["trainer.max_epochs=20"],
        )
    assert main([str(tmp_path / "dot"), str(tmp_path / "euclid"), "--out", str(tmp_path / "a")]) == 0
    assert "model=dot,trainer.max_epochs=9" in capsys.readouterr().out
    assert (
        main(
            [
                str(tmp_path / "dot"),
                str(tmp_path / "euclid"),
                "--ignore",
                "trainer.max_epochs",
                "--out",
                str(tmp_path / "b"),
            ]
        )
        == 0
    )
    row = euclid_row(capsys.readouterr().out)
    assert row.startswith("| model=euclid | 3 |") and "(paired t)" in row and "worse" in row, row
    assert {r.config for r in compare(find_runs([tmp_path], ignore=["trainer.max_epochs"])).rows} == {
        "model=dot",
        "model=euclid",
    }


def test_a_verdict_between_runs_that_all_stayed_at_chance_says_so_first(tmp_path, capsys):
    for seed in range(3):  # chance is 0.1 (10 classes): neither mixer learnt anything
        record(tmp_path / "runs", f"dot/{seed}", "dot", seed, 0.10 + 0.01 * seed)
        record(tmp_path / "runs", f"euclid/{seed}", "euclid", seed, 0.11 - 0.01 * seed)
        record(tmp_path / "runs", f"cosine/{seed}", "cosine", seed, 0.80 + 0.01 * seed)  # learnt: no such lead
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "cmp")]) == 0
    lead = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("**Primary metric"))
    assert "model=euclid vs model=dot: all runs at chance; " in lead, lead
    assert "model=cosine vs model=dot: inconclusive" in lead, lead
    written = {r["config"]: r for r in csv.DictReader((tmp_path / "cmp" / "summary.csv").open())}
    assert written["model=euclid"]["test/loss verdict"].startswith("all runs at chance; ")
