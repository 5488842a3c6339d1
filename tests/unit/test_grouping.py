"""Configurations are what ran: runs grouped by their recorded settings and mixer source, named by what differs;
equal tuning grids and budgets; verdicts that say what they rest on (few seeds, budgets still improving)."""

from __future__ import annotations

import copy
import csv
import json
import os
import time

import yaml

from attnexp.cli.compare import main

SUMMARY = [["test/acc", "max"], ["val/acc_best", "max"], ["test/loss", "min"]]
CONFIG = {
    "seed": 0,
    "threads": None,
    "paths": {"log_dir": "outputs"},
    "model": {"_target_": "attnexp.mixers.DotAttention", "_partial_": True, "heads": 1},
    "net": {"_target_": "attnexp.networks.PatchClassifier", "mixer": "${model}", "depth": 1},
    "module": {"optimizer": {"_target_": "torch.optim.Adam", "lr": 0.003}},
    "trainer": {"max_epochs": 5, "accelerator": "auto"},
}
DIFF = {"_target_": "diff_attention.DiffAttention", "_partial_": True, "heads": 1, "lambda_init": 0.8}
SOURCES = {
    "dot": {
        "attnexp.mixers.dot.DotAttention": {"module": "attnexp.mixers.dot", "file": "dot.py", "sha256": "804452aa4810"}
    },
    "diff": {
        "diff_attention.DiffAttention": {
            "module": "diff_attention",
            "file": "diff_attention.py",
            "sha256": "3f2a11111111",
        }
    },
}


def run(root, name: str, mixer: str, seed: int, acc: float, overrides=(), changes=None, source=None, **fields):
    """A finished run folder as attnexp writes it: its command line's overrides and its record of what ran."""
    folder = root / name
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"model={mixer}", *overrides, f"seed={seed}"]))
    config = copy.deepcopy(CONFIG) | {"seed": seed}
    if mixer != "dot":
        config["model"] = copy.deepcopy(DIFF)
    for key, value in (changes or {}).items():
        node = config
        *path, leaf = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    mixers = copy.deepcopy(SOURCES[mixer])
    if source:
        next(iter(mixers.values()))["sha256"] = source
    record = {
        "status": "ok",
        "mixer": mixer,
        "data": "digits",
        "seed": seed,
        "params": 100,
        "classes": 10,
        "epochs": 5,
        "summary": SUMMARY,
        "monitor": "val/acc",
        "mode": "max",
        "examples": {"val": 2000, "test": 2000},
        "choices": {"model": mixer, "data": "digits", "net": "patch", "trainer": "default", "paths": "default"},
        "config": config,
        "mixers": mixers,
        "test/acc": acc,
        "val/acc_best": acc,
        "test/loss": 1 - acc,
        "monitor_best": acc,
        **fields,
    }
    (folder / "metrics.json").write_text(json.dumps(record))
    return folder


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
    later = time.time() + 60
    for seed in range(3):
        folder = run(tmp_path / "edited", f"diff/{seed}", "diff", seed, 0.70 + 0.01 * seed, source="9b1c22222222")
        os.utime(folder / ".hydra", (later, later))  # started after the first sweep
    found, text = summarise(tmp_path)
    assert {c: r["n"] for c, r in found.items()} == {
        "model=dot": "3",
        "model=diff": "3",
        "model=diff (source changed: 9b1c…)": "3",
    }
    assert "diff_attention.DiffAttention in diff_attention.py: 3f2a11111111 in model=diff, 9b1c22222222 here" in text
    assert "| model=diff (source changed: 9b1c…) | 3 |" in text.split("### test/acc")[1]  # compared with model=dot


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


def test_records_without_their_settings_are_grouped_by_overrides_with_a_note(tmp_path):
    for seed in range(2):
        run(tmp_path, f"dot/{seed}", "dot", seed, 0.8)
        old = run(tmp_path, f"diff/{seed}", "diff", seed, 0.8, overrides=["module.optimizer.lr=0.003"])
        record = json.loads((old / "metrics.json").read_text())
        for key in ("config", "choices", "mixers"):
            record.pop(key)
        (old / "metrics.json").write_text(json.dumps(record))
    found, text = summarise(tmp_path)
    assert set(found) == {"model=dot", "model=diff,module.optimizer.lr=0.003"}  # as their overrides name them
    assert "recorded without their settings" in text


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
    assert "| model=diff | 2/2 | 100 | - | - | 1/2 | ok |" in text
