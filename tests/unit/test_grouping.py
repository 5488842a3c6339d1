"""Configurations are what ran: runs grouped by their recorded settings and mixer source, named by what differs;
equal tuning grids and budgets; verdicts that say what they rest on (few seeds, budgets still improving)."""

from __future__ import annotations

import csv

from run_records import record

from attnexp.cli.compare import main


def run(
    root, name: str, mixer: str, seed: int, acc: float, overrides=(), changes=None, source=None, code=None, **fields
):
    """A finished run folder: ``dot``, or ``diff``, a mixer of the user's own (``diff_attention.py``, whose file's
    hash is ``source``); ``code``: other versions of attnexp's files."""
    code = ({"diff_attention.py": source or "3f2a11111111"} if mixer == "diff" else {}) | (code or {})
    changes = ({"model.lambda_init": 0.8} if mixer == "diff" else {}) | (changes or {})
    return record(root, name, mixer, seed, acc, overrides=list(overrides), changes=changes, code=code, **fields)


def summarise(root, *args: str) -> tuple[dict[str, dict], str]:
    """attnexp-compare on ``root``: the rows of summary.csv's table of every configuration, and summary.md."""
    out = root.parent / f"cmp_{root.name}_{len(list(root.parent.glob('cmp_*')))}"
    assert main([str(root), "--out", str(out), *args]) == 0
    return {r["config"]: r for r in csv.DictReader((out / "summary.csv").open()) if r["table"] == "all"}, (
        out / "summary.md"
    ).read_text()


def rows(root, *args: str) -> dict[str, dict]:
    return summarise(root, *args)[0]


def test_runs_that_differ_only_in_a_mixers_source_are_two_configurations_named_by_it(tmp_path):
    for seed in range(3):
        run(tmp_path / "first", f"dot/{seed}", "dot", seed, 0.80 + 0.01 * seed)
        run(tmp_path / "first", f"diff/{seed}", "diff", seed, 0.82 + 0.01 * seed)
        run(tmp_path / "edited", f"diff/{seed}", "diff", seed, 0.70 + 0.01 * seed, source="9b1c22222222")
    found, text = summarise(tmp_path)
    assert {c: r["n"] for c, r in found.items()} == {
        "model=dot": "3",
        "model=diff (code: diff_attention.py 3f2a…)": "3",
        "model=diff (code: diff_attention.py 9b1c…)": "3",
    }
    assert (
        "diff_attention.py: 3f2a11111111 in model=diff (code: diff_attention.py 3f2a…), 9b1c22222222 in model=diff "
        "(code: diff_attention.py 9b1c…)" in text
    )
    table = text.split("### test/acc")[1]
    for version in ("3f2a", "9b1c"):  # each compared with model=dot: the user's mixer file is no code dot ran
        row = next(
            line for line in table.splitlines() if line.startswith(f"| model=diff (code: diff_attention.py {version}")
        )
        assert "| 3 |" in row and "baseline" not in row and "no baseline" not in row


def test_runs_of_other_code_are_other_configurations_never_one_row_nor_a_repeated_seed(tmp_path, capsys):
    """A checkout's attnexp/data/digits.py edited between two sweeps of dot: two configurations named by the file,
    whether the seeds repeat or not; a mixer that ran the edited code alone has no baseline in the clean one."""
    edited = {"attnexp/data/digits.py": "9b1c22222222"}
    for seed in range(3):
        run(tmp_path / "clean", f"dot/{seed}", "dot", seed, 0.3556 + 0.01 * seed)
        run(tmp_path / "same_seeds", f"dot/{seed}", "dot", seed, 0.3806 + 0.01 * seed, code=edited)
    for seed in (3, 4):
        run(tmp_path / "new_seeds", f"dot/{seed}", "dot", seed, 0.3806 + 0.01 * seed, code=edited)
    clean, changed = "model=dot (code: attnexp/data/digits.py 3f2a…)", "model=dot (code: attnexp/data/digits.py 9b1c…)"
    for other, n in (("same_seeds", "3"), ("new_seeds", "2")):
        assert main([str(tmp_path / "clean"), str(tmp_path / other), "--out", str(tmp_path / f"cmp_{other}")]) == 0
        text = capsys.readouterr().out
        found = {r["config"]: r["n"] for r in csv.DictReader((tmp_path / f"cmp_{other}" / "summary.csv").open())}
        assert found == {clean: "3", changed: n}
        assert f"attnexp/data/digits.py: 3f2a11111111 in {clean}, 9b1c22222222 in {changed}" in text
    for seed in range(3):
        run(tmp_path / "euclid", f"euclid/{seed}", "euclid", seed, 0.37, code=edited)
    found = rows_of(tmp_path, "clean", "euclid")
    assert found["model=euclid (code: attnexp/data/digits.py 9b1c…)"]["test/acc verdict"] == (
        f"no baseline: {clean} ran other code (attnexp/data/digits.py)"
    )


def rows_of(root, *folders: str) -> dict[str, dict]:
    out = root / f"cmp_{'_'.join(folders)}"
    assert main([*(str(root / f) for f in folders), "--out", str(out)]) == 0
    return {r["config"]: r for r in csv.DictReader((out / "summary.csv").open()) if r["table"] == "all"}


def test_runs_that_differ_only_in_a_config_files_value_are_named_by_it(tmp_path):
    for seed in range(2):
        run(tmp_path / "a", f"diff/{seed}", "diff", seed, 0.8)
        run(tmp_path / "a", f"dot/{seed}", "dot", seed, 0.8)
        run(tmp_path / "b", f"diff/{seed}", "diff", seed, 0.7, changes={"model.lambda_init": 0.2})
    found, text = summarise(tmp_path)
    assert set(found) == {"model=dot", "model=diff (lambda_init=0.8)", "model=diff (lambda_init=0.2)"}
    note = next(line for line in text.splitlines() if line.startswith("- model.lambda_init"))
    assert "no override set it" in note and "0.2 in model=diff (lambda_init=0.2)" in note


def test_an_override_equal_to_the_default_and_options_that_cannot_change_the_method_are_one_configuration(
    tmp_path, capsys
):
    for seed in range(2):
        run(tmp_path / "a", f"dot/{seed}", "dot", seed, 0.80 + 0.01 * seed)
    for seed in range(2, 4):
        run(
            tmp_path / "b",
            f"dot/{seed}",
            "dot",
            seed,
            0.81 + 0.01 * seed,
            overrides=["module.optimizer.lr=0.003", "threads=1", "paths.log_dir=elsewhere"],
            changes={"threads": 1, "paths.log_dir": "elsewhere"},
        )
    assert {c: r["n"] for c, r in rows(tmp_path).items()} == {"model=dot": "4"}
    run(tmp_path / "c", "dot/0", "dot", 0, 0.9, overrides=["module.optimizer.lr=0.003"])  # seed 0 of it again
    assert main([str(tmp_path), "--out", str(tmp_path.parent / "repeated")]) == 2
    assert "the same configuration and seed finished more than once (model=dot seed 0" in capsys.readouterr().err


def test_a_setting_that_differs_names_the_configurations_and_ignore_pools_them(tmp_path):
    for seed in range(3):
        run(tmp_path, f"dot5/{seed}", "dot", seed, 0.8, overrides=["trainer.max_epochs=5"])
        run(
            tmp_path,
            f"dot9/{seed}",
            "dot",
            seed + 3,
            0.8,
            overrides=["trainer.max_epochs=9"],
            changes={"trainer.max_epochs": 9},
        )
    assert set(rows(tmp_path)) == {"trainer.max_epochs=5", "trainer.max_epochs=9"}
    assert set(rows(tmp_path, "--ignore", "trainer.max_epochs")) == {"model=dot"}


def test_unequal_tuning_grids_are_not_compared_and_the_command_that_completes_the_grid_is_given(tmp_path, capsys):
    score = {("dot", "0.001"): 0.9, ("dot", "0.003"): 0.7, ("diff", "0.003"): 0.6}
    for (mixer, lr), acc in score.items():
        for seed in range(3):
            run(
                tmp_path / "runs",
                f"{mixer}/{lr}/{seed}",
                mixer,
                seed,
                acc + 0.01 * seed,
                overrides=[f"module.optimizer.lr={lr}"],
                changes={"module.optimizer.lr": float(lr)},
            )
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "cmp")]) == 0
    text = capsys.readouterr().out.split("### Each configuration at its best module.optimizer.lr")[1]
    row = next(line for line in text.splitlines() if line.startswith("| model=diff"))
    assert "| module.optimizer.lr in {0.003} |" in row
    assert (
        "not comparable: model=dot tuned over {0.001, 0.003}, model=diff over {0.003}; to tune alike: "
        "attnexp --multirun model=diff module.optimizer.lr=0.001 seed=0,1,2"
    ) in row
    assert "| module.optimizer.lr in {0.001, 0.003} |" in next(
        line for line in text.splitlines() if line.startswith("| model=dot")
    )
    tuned = {r["config"]: r for r in csv.DictReader((tmp_path / "cmp" / "summary.csv").open()) if r["table"] == "tuned"}
    assert tuned["model=diff"]["test/acc p_adjusted"] == "nan"  # no member of the family


def test_unequal_budgets_are_not_compared(tmp_path):
    for seed in range(3):
        run(tmp_path, f"dot/{seed}", "dot", seed, 0.80 + 0.01 * seed)
        run(tmp_path, f"diff/{seed}", "diff", seed, 0.90 + 0.02 * seed, changes={"trainer.max_epochs": 10})
    diff = rows(tmp_path)["model=diff"]
    assert diff["test/acc verdict"] == (
        "not comparable: model=dot trained with trainer.max_epochs=5, model=diff with "
        "trainer.max_epochs=10; to match: attnexp --multirun model=dot trainer.max_epochs=10 seed=0,1,2"
    )
    assert rows(tmp_path, "--ignore", "trainer.max_epochs")["model=diff"]["test/acc verdict"].startswith("better")


def test_a_verdict_from_two_seeds_or_on_budgets_still_improving_says_so(tmp_path):
    for seed in range(2):
        run(tmp_path / "runs", f"dot/{seed}", "dot", seed, 0.80 + 0.01 * seed, still_improving=False)
        run(tmp_path / "runs", f"diff/{seed}", "diff", seed, 0.70 + 0.013 * seed, still_improving=seed == 1)
    found, text = summarise(tmp_path / "runs")
    verdict = found["model=diff"]["test/acc verdict"]
    assert verdict.startswith("worse") and verdict.endswith(
        "(only 2 seeds; 1 of 4 runs still improving at their last epoch)"
    )
    assert text.startswith(f"**Primary metric test/acc.** model=diff vs model=dot: {verdict}.")
    assert "### test/acc (primary; higher is better)" in text and "### test/loss (secondary; lower is better)" in text
    assert "model=diff: 1 of 2 runs (seed 1) were still improving at their last epoch" in text
    assert "| model=diff | 2/2 | 100 | - | - | - | 1/2 | ok |" in text  # no weight_kind recorded: -


def test_rows_of_one_mixer_that_differ_only_in_code_name_the_files_that_differ(tmp_path):
    """Finding: a retention run started alone and one from a sweep that also imported the other jobs' mixers were
    named "identity 4f3105" and "identity b2b27e", with no word of why."""
    shared = {"retention_attention.py": "7a7a11111111"}
    swept = shared | {"mta.py": "1b1b22222222", "selective_attention.py": "2c2c33333333"}
    for seed in range(3):
        run(tmp_path, f"dot/{seed}", "dot", seed, 0.80 + 0.01 * seed)
        run(tmp_path, f"sweep/{seed}", "retention", seed, 0.82 + 0.01 * seed, code=swept)
        run(tmp_path, f"alone/{seed}", "retention", seed, 0.81 + 0.01 * seed, code=shared)
    found, text = summarise(tmp_path)
    names = sorted(found)
    assert names[0] == "model=dot" and not any("identity " in n for n in names), names
    assert "model=retention (code: without mta.py, selective_attention.py)" in names, names
    assert any(n.startswith("model=retention (code: mta.py, selective_attention.py ") for n in names), names
    assert "mta.py: 1b1b22222222 in model=retention (code: mta.py" in text and "absent in model=retention (code: " in (
        text
    )


def test_a_parameter_count_5_percent_or_more_above_the_baselines_is_noted_with_each_rows_weights(tmp_path):
    """Finding: a gate that added 8% parameters was compared without a note (the note began at 10%)."""
    for seed in range(3):
        run(tmp_path, f"dot/{seed}", "dot", seed, 0.80, params=1000, weight_kind="distributions")
        run(tmp_path, f"gated/{seed}", "gated", seed, 0.81, params=1080, weight_kind="non-negative")
        run(tmp_path, f"retention/{seed}", "retention", seed, 0.81, params=1040, weight_kind="signed")
    _, text = summarise(tmp_path)
    assert "model=gated has 1,080 parameters, 1.08x the baseline's 1,000" in text
    assert "model=retention has 1,040" not in text
    for config, kind in (
        ("model=dot", "distributions"),
        ("model=gated", "non-negative"),
        ("model=retention", "signed"),
    ):
        assert f"| {config} | 3/3 | " in text and f"| {kind} |" in next(
            line for line in text.split("### Runs")[1].splitlines() if line.startswith(f"| {config} |")
        )


def test_an_invalid_run_is_left_out_with_why(tmp_path):
    for seed in range(3):
        run(tmp_path, f"dot/{seed}", "dot", seed, 0.80 + 0.01 * seed)
        run(
            tmp_path, f"mta/{seed}", "mta", seed, 0.99, status="invalid", error="the trained network reads later tokens"
        )
    found, text = summarise(tmp_path)
    assert list(found) == ["model=dot"]
    assert "(invalid: the trained network reads later tokens)" in text
