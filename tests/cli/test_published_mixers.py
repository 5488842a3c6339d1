"""Published attention mechanisms written as their authors write them, from a folder of one's own
(examples/published_attention): each passes the conformance kit at two network sizes and trains end to end with
every callback; and what the kit and a run say about mixers that break the contract."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from broken_mixers import DropsALastToken
from helpers import FAST, PUBLISHED, REPO, line_of, read_events, read_metrics, run_cli, run_dirs
from helpers import run_kit as kit

SIZES = {  # a network of another width, depth and number of heads than the small default (gau: one head)
    "diff": ["data=digits", "net.dim=16", "net.depth=2", "net.prenorm=true", "model.heads=2"],
    "linear": ["data=digits", "net.dim=16", "net.depth=2", "net.prenorm=true", "model.heads=2"],
    "gau": ["data=digits", "net.dim=16", "net.depth=2", "net.prenorm=true"],
}
KINDS = {"diff": "attn/layer0/negative_mass", "linear": "attn/layer0/entropy", "gau": "attn/layer0/mass"}


@pytest.fixture
def folder(tmp_path) -> Path:
    """The example folder copied where a user would keep it, with the tests' broken mixers beside it."""
    shutil.copytree(PUBLISHED, tmp_path / "mine")
    shutil.copy(REPO / "tests" / "broken_mixers.py", tmp_path / "mine" / "broken_mixers.py")
    for name in (
        "Transposes",
        "FailsInTraining",
        "DropsALastToken",
        "NoWeights",
        "CausalOnly",
        "BuiltWithABug",
        "AttendDropsAToken",
        "OldFlagSigned",
    ):
        (tmp_path / "mine" / "configs" / "model" / f"{name.lower()}.yaml").write_text(
            f"_target_: broken_mixers.{name}\n_partial_: true\n"
        )
    return tmp_path / "mine"


@pytest.mark.parametrize("name", list(SIZES))
def test_each_published_mixer_passes_the_kit_at_two_network_sizes(folder, name):
    if name == next(iter(SIZES)):  # the kit's small default once (the sized call runs the same 14 checks and more)
        small = kit(folder, f"model={name}", "--no-speed")
        assert small.returncode == 0 and "14 checks: all passed" in small.stdout, small.stdout + small.stderr[-2000:]
        assert "speed at" not in small.stdout and "the kit's small default" in small.stdout
    sized = kit(folder, f"model={name}", *SIZES[name])
    assert sized.returncode == 0 and "14 checks: all passed" in sized.stdout, sized.stdout + sized.stderr[-2000:]
    heads = "2 heads" if name != "gau" else "1 head"
    assert f"width 16, {heads}, batch 3, 16 tokens (19 keys for cross-attention)" in sized.stdout, sized.stdout
    assert "the network of data=digits, net=patch" in sized.stdout and "PASS  smoke run" in sized.stdout
    speed = sized.stdout.splitlines()[-1]
    assert speed.startswith("speed at batch 64, 16 tokens, width 16") and "x dot's time" in speed and "CPU " in speed, (
        speed
    )


def test_each_published_mixer_trains_beside_dot_with_every_callback(folder):
    run_cli(
        folder, "--multirun", "model=dot,diff,linear,gau", "data=digits", "net.dim=16", *FAST, "hydra/launcher=basic"
    )
    runs = {read_metrics(r)["mixer"]: r for r in run_dirs(folder / "outputs")}
    assert sorted(runs) == ["diff", "dot", "gau", "linear"]
    for run in runs.values():
        metrics = read_metrics(run)
        assert metrics["status"] == "ok" and (run / "checkpoints" / "last.ckpt").exists(), metrics
        assert {"figures/attention/layer0", "figures/predictions"} <= read_events(run).images
    for name, key in KINDS.items():
        assert key in read_metrics(runs[name]), (name, read_metrics(runs[name]))
    assert "attn/layer0/entropy" not in read_metrics(runs["diff"]) and "attn/layer0/score_max" in read_metrics(
        runs["gau"]
    )
    diff = read_metrics(runs["diff"])  # its own attend: no scores, but its weights' NaN count, and the record says so
    assert "attn/layer0/nonfinite_weights" in diff and diff["telemetry_unmeasured"][0].startswith("DiffAttention: ")
    assert {read_metrics(run)["causal"] for run in runs.values()} == {False}


def test_the_kit_catches_an_output_in_another_layout_at_the_composed_size(folder):
    """(B, C, L) returned where C = L: 16 tokens of width 16 on the digits; a run would train on it and exit 0."""
    proc = kit(folder, "model=transposes", "data=digits", "net.dim=16")
    assert proc.returncode == 1 and "FAIL  token layout" in proc.stdout and "FAIL  shapes" in proc.stdout, proc.stdout
    assert "width 16, 1 head, batch 3, 16 tokens" in proc.stdout and "speed at" not in proc.stdout


def test_the_kits_smoke_run_finds_what_only_training_shows(folder):
    proc = kit(folder, "model=failsintraining")
    lines = {line[6:31].strip(): line for line in proc.stdout.splitlines() if line[:4] in ("PASS", "FAIL", "n/a ")}
    assert proc.returncode == 1 and lines["smoke run"].startswith("FAIL"), proc.stdout + proc.stderr[-2000:]
    failed = {name for name, line in lines.items() if line.startswith("FAIL")}
    assert failed == {"batch independence", "smoke run"}, proc.stdout  # batch independence is checked training too
    assert "raised RuntimeError: this mixer cannot train (in FailsInTraining, at " in lines["batch independence"]
    assert (
        "the mixer FailsInTraining raised RuntimeError: this mixer cannot train (at broken_mixers.py:"
        in lines["smoke run"]
    )
    assert "14 checks: 2 failed (batch independence, smoke run)" in proc.stdout


def test_a_mixer_without_weights_runs_without_attention_telemetry_and_says_so(folder):
    proc = run_cli(folder, "model=noweights", *FAST)
    (run,) = run_dirs(folder / "outputs")
    assert read_metrics(run)["status"] == "ok" and not [k for k in read_metrics(run) if k.startswith("attn/")]
    said = [line for line in proc.stderr.splitlines() if "returns no attention weights" in line]
    assert said == [
        "NoWeights returns no attention weights (forward(..., need_weights=True) gave None): no attention "
        "telemetry and no attention figures for this run."
    ], proc.stderr[-3000:]


@pytest.mark.parametrize(
    "name,words",
    [
        (
            "failsintraining",
            "Run failed: the mixer FailsInTraining raised RuntimeError: this mixer cannot train (at broken_mixers.py:",
        ),
        ("dropsalasttoken", "Run failed: DropsALastToken.forward (broken_mixers.py:"),
        ("builtwithabug", "Run failed: the mixer BuiltWithABug raised ValueError while it was built: invalid literal"),
        ("attenddropsatoken", "Run failed: AttendDropsAToken.attend (broken_mixers.py:"),
        ("oldflagsigned", "Run failed: OldFlagSigned (broken_mixers.py:"),
    ],
)
def test_a_failure_inside_a_mixer_names_it_and_its_line_with_the_traceback_in_train_log(folder, name, words):
    proc = run_cli(folder, f"model={name}", *FAST, check=False)
    (run,) = run_dirs(folder / "outputs")
    message = " ".join(proc.stderr.split())
    assert proc.returncode == 1 and words in message and read_metrics(run)["status"] == "failed", message[-3000:]
    assert f"The traceback is in {run.relative_to(folder)}/train.log." in message
    log = (run / "train.log").read_text()
    assert "Traceback (most recent call last)" in log and "broken_mixers.py" in log
    if name == "dropsalasttoken":  # and the line that computed the output, not only forward's first line
        computed = re.escape(f"(computed at broken_mixers.py:{line_of(DropsALastToken, 'out[:, :-1]').rsplit(':')[1]}")
        shape = (
            r"returned an output of shape \((\d+), 15, 4\) "
            + computed
            + r", in forward\) for tokens of shape \(\1, 16, 4\)"
        )
        assert re.search(shape, message), message


@pytest.mark.parametrize("name", ["stickbreaking", "fox"])
def test_each_causal_only_example_passes_the_kit_on_the_language_model(folder, name):
    """Finding: a correct causal-only mixer could not pass the kit, and never got its speed line."""
    proc = kit(folder, f"model={name}", "data=corpus")
    out = proc.stdout
    assert proc.returncode == 0 and "14 checks: all passed" in out, out + proc.stderr[-2000:]
    first, speed = out.splitlines()[0], out.splitlines()[-1]
    assert "width 64, 1 head, batch 3, 65 tokens (68 keys for cross-attention) (the network's 8; a causal" in first
    assert "the network of data=corpus, net=lm (the mixer causal" in first and "with and without padding" in first
    assert "n/a   token layout" in out and "(causal self-attention)" in out
    assert speed.startswith("speed at batch 64, 8 tokens, width 64, 1 head, causal") and "x dot's time" in speed


def test_the_causal_only_examples_train_beside_dot_and_are_recorded_causal(folder):
    """Finding: language-model runs were recorded causal: false although they trained causal. A causal-only mixer
    whose config does not say causal (CausalOnly) passes the kit as the language model builds it."""
    proc = kit(folder, "model=causalonly", "data=corpus", "--no-speed")
    assert proc.returncode == 0 and "14 checks: all passed" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    run_cli(
        folder, "--multirun", "model=dot,stickbreaking,fox,causalonly", "data=corpus", *FAST, "hydra/launcher=basic"
    )
    runs = {read_metrics(r)["mixer"]: r for r in run_dirs(folder / "outputs")}
    assert sorted(runs) == ["causalonly", "dot", "fox", "stickbreaking"]
    for name, run in runs.items():
        metrics = read_metrics(run)
        assert metrics["status"] == "ok" and metrics["causal"] is True, (name, metrics)
        assert "figures/attention" in read_events(run).images
    assert read_metrics(runs["dot"])["config"]["model"]["causal"] is False  # its config's; the network made it causal
    assert "attn/layer0/mass" in read_metrics(runs["stickbreaking"])  # non-negative weights: their mass
    assert "attn/layer0/entropy" in read_metrics(runs["fox"])


def test_the_kit_measures_speed_at_the_size_it_checks(folder):
    """Finding: without a network named the kit checked at width 16 but measured speed at the default network's."""
    proc = kit(folder, "model=dot")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and "width 16, the mixer's heads, batch 3, 6 tokens" in lines[0], proc.stdout
    assert lines[-1].startswith("speed at batch 3, 6 tokens, width 16, 1 head ("), lines[-1]


@pytest.mark.parametrize(
    "args,words",
    [
        (["model=dto"], "Did you mean model=dot?"),
        (["model=dot", "modle.heads=2"], "Did you mean model.heads?"),
        (["model=dot,", "diff"], "is one list split by a space"),
    ],
)
def test_the_kit_answers_typos_as_attnexp_does(folder, args, words):
    """Finding: attnexp-check answered a misspelt key or option with Hydra's raw text and exit status 1."""
    proc = kit(folder, *args)
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]


def test_the_kit_names_the_mixer_whose_constructor_fails_not_the_network(folder):
    """Finding: the kit blamed PatchClassifier for an error in the mixer's own constructor, and called a bug in it
    bad input."""
    proc = kit(folder, "model=builtwithabug")
    message = " ".join(proc.stderr.split())
    assert proc.returncode == 1 and "PatchClassifier" not in message, message[-2000:]
    assert message.startswith("attnexp-check: the mixer BuiltWithABug raised ValueError while it was built: invalid")
    assert "(at broken_mixers.py:" in message and "in __init__)" in message
