"""What a run records of what ran: the fingerprint of its settings (what cannot change the method left out), the
git commit of the checkout, and whether its budget ended while it was still improving."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers import compose_cfg

from attnexp.cli.train import CONFIG_DIR
from attnexp.cli.typos import check_composition, check_words
from attnexp.errors import AttnexpError
from attnexp.runs import checkout, metrics_file
from attnexp.runs.convergence import judge
from attnexp.runs.fingerprint import config_record, fingerprint, method
from attnexp.runs.resume import check_same_sources


def settings_of(overrides, tmp_path):
    record = config_record(compose_cfg(overrides, tmp_path))
    return record, fingerprint(method(record))


def test_the_fingerprint_counts_settings_not_their_spelling_nor_options_that_cannot_change_the_method(tmp_path):
    _, plain = settings_of(["model=dot"], tmp_path / "a")
    _, spelled = settings_of(
        [
            "module.optimizer.lr=0.003",
            "threads=1",
            "seed=4",
            "paths.log_dir=elsewhere",
            "trainer.accelerator=cpu",
            "module.divergence_check_every=5",
            "callbacks.progress_bar.refresh_rate=0",
            "logger=csv",
        ],
        tmp_path / "b",
    )
    _, other = settings_of(["module.optimizer.lr=0.01"], tmp_path / "c")
    _, budget = settings_of(["trainer.max_epochs=6"], tmp_path / "d")
    _, stopped = settings_of(
        ["+callbacks.stop._target_=pytorch_lightning.callbacks.EarlyStopping", "+callbacks.stop.monitor=val/acc"],
        tmp_path / "e",
    )  # a callback that ends runs early
    assert plain == spelled and len({plain, other, budget, stopped}) == 4


def test_a_location_stays_as_written_in_the_settings_and_a_node_is_recorded_where_it_lives(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNEXP_DATA_DIR", "/one/machine")
    here, fp_here = settings_of(["experiment=nanogpt_char"], tmp_path / "a")
    monkeypatch.setenv("ATTNEXP_DATA_DIR", "/another")
    there, fp_there = settings_of(["experiment=nanogpt_char"], tmp_path / "b")
    assert here["data"]["path"] == "${paths.data_dir}/tinyshakespeare/input.txt" and fp_here == fp_there
    assert (
        here["paths"]["data_dir"] == "/one/machine" and there["paths"]["data_dir"] == "/another"
    )  # resolved for readers
    assert here["net"]["mixer"] == "${model}"
    cosine, _ = settings_of(["module/scheduler=cosine", "trainer.max_epochs=7"], tmp_path / "c")
    assert cosine["module"]["scheduler"]["T_max"] == 7  # a value that points at another value is that value


@pytest.mark.parametrize(
    "history,mode,examples,improving",
    [
        (
            [[1, 0.50], [2, 0.60], [3, 0.70], [4, 0.80]],
            "max",
            180,
            True,
        ),  # best at the end, well beyond one standard error
        ([[1, 0.50], [2, 0.80], [3, 0.80], [4, 0.801]], "max", 180, False),  # a new best by less than its margin
        ([[1, 0.50], [2, 0.90], [3, 0.85], [4, 0.80]], "max", 180, False),  # best long before the end
        ([[1, 2.0], [2, 1.5], [3, 1.2]], "min", None, True),  # a loss still falling by more than 1%
        ([[1, 2.0], [2, 1.5], [3, 1.499]], "min", None, False),
        ([[1, 0.5]], "max", 180, None),  # one validation: no trend
    ],
)
def test_a_budget_is_still_improving_when_its_last_epoch_is_best_by_more_than_the_margin(
    history, mode, examples, improving
):
    judged = judge(history, "val/acc" if mode == "max" else "val/loss", mode, examples)
    assert judged["still_improving"] is improving


def test_the_checkout_says_its_commit_and_whether_its_code_changed(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("no git program to make a repository with")

    def git(*args):
        subprocess.run(
            ["git", "-C", str(tmp_path), *args],
            check=True,
            capture_output=True,
            env={
                "GIT_AUTHOR_NAME": "a",
                "GIT_AUTHOR_EMAIL": "a@b",
                "GIT_COMMITTER_NAME": "a",
                "GIT_COMMITTER_EMAIL": "a@b",
                "PATH": "/usr/bin:/bin",
            },
        )

    (tmp_path / "attnexp").mkdir()
    (tmp_path / "attnexp" / "mixer.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not code\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "one")
    head = subprocess.run(
        ["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert checkout.describe(tmp_path) == {"commit": head, "modified": False}
    (tmp_path / "notes.txt").write_text("changed, but no code\n")
    assert checkout.describe(tmp_path)["modified"] is False
    (tmp_path / "attnexp" / "mixer.py").write_text("x = 2\n")
    assert checkout.describe(tmp_path)["modified"] is True
    (tmp_path / "attnexp" / "mixer.py").write_text("x = 1\n")
    (tmp_path / "attnexp" / "new.py").write_text("y = 1\n")
    assert checkout.describe(tmp_path)["modified"] is True
    assert checkout.describe(tmp_path / "attnexp") == {}  # not a checkout's root


@pytest.mark.parametrize(
    "args,words",
    [
        (["trainer.max_epoch=3"], ["trainer.max_epoch=3 sets trainer.max_epoch", "Did you mean trainer.max_epochs?"]),
        (["data=mnst"], ["data=mnst names no option of the config group data", "Did you mean data=mnist?"]),
        (["mdl.heads=2"], ["Did you mean model.heads?"]),
        (
            ["data=dates", "net.heads=2"],
            ["net.heads=2 sets net.heads, which is not a key", "Did you mean model.heads?"],
        ),
        (["+seed=1"], ["which the config already has: set it without '+' (seed=1)"]),
        (["-m", "model=dot,euclid", "model.eps=0.1"], ["a key of model=euclid only: every job of the sweep gets it"]),
        (
            ["-m", "model=euclid,dot", "model.eps=0.1"],
            ["model.eps is not a key of model=dot: every job of the sweep gets it"],
        ),
        (
            ["trainer.max_time=00:00:05:00"],
            ["pytorch_lightning.Trainer takes max_time: add it with +trainer.max_time=00:00:05:00"],
        ),
        (["model=dot,euclid"], ["model=dot,euclid gives several values, which makes a sweep", "add --multirun (-m)"]),
        (["hydra.mode=MULTIRUN", "seed=0,1", "--cfg", "job"], ["seed=0,1 gives several values"]),
    ],
)
def test_what_hydra_cannot_compose_is_explained_with_the_nearest_keys_and_options(args, words):
    with pytest.raises(AttnexpError) as caught:
        check_composition(args, CONFIG_DIR)
    for word in words:
        assert word in str(caught.value)
    assert "+trainer.max_epoch" not in str(caught.value) and "To append" not in str(caught.value)


def test_a_list_split_by_a_space_is_explained_and_good_command_lines_pass():
    with pytest.raises(AttnexpError, match=r"'model=dot, euclid' is one list split by a space.*write model=dot,euclid"):
        check_words(["-m", "model=dot,", "euclid"])
    check_words(["-m", "model=dot,euclid", "--cfg", "job", "~model.bias"])
    check_composition(
        ["-m", "model=euclid,dot", "seed=0,1", "+trainer.max_time=00:00:05:00", "hydra/launcher=basic"], CONFIG_DIR
    )
    check_composition(["hydra.mode=MULTIRUN", "model=euclid,dot", "model.heads=[1]"], CONFIG_DIR)


def test_resume_refuses_a_run_whose_mixer_source_changed(tmp_path):
    mixers = {"mine.Mine": {"module": "mine", "file": "mine.py", "sha256": "3f2a11111111"}}
    metrics_file.write(tmp_path, {"status": "interrupted", "mixers": mixers})
    check_same_sources(tmp_path, mixers)  # the same source: continued
    with pytest.raises(
        AttnexpError,
        match=r"another version of its mixer's source \(mine.Mine in mine.py: 3f2a11111111 there, "
        r"9b1c22222222 now\), so resume=true cannot continue it",
    ):
        check_same_sources(tmp_path, {"mine.Mine": {**mixers["mine.Mine"], "sha256": "9b1c22222222"}})
    metrics_file.write(tmp_path, {"status": "interrupted"})
    check_same_sources(tmp_path, {})  # a record of an earlier version says nothing of its source


def test_a_key_given_twice_composes_as_hydra_composes_it():
    cfg = check_composition(["seed=1", "seed=1", "trainer.max_epochs=2"], CONFIG_DIR)
    assert (cfg.seed, cfg.trainer.max_epochs) == (1, 2)
