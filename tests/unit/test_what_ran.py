"""What a run records of what ran: its identity (settings, what cannot change a number left out; the code it imported;
the data it read), the git commit of the checkout, whether its budget ended while it was still improving, and what
the pre-flight stage says of a command line Hydra cannot compose."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import compose_cfg

from attnexp.cli.preflight import jobs_of
from attnexp.cli.train import CONFIG_DIR
from attnexp.cli.typos import check_words
from attnexp.errors import AttnexpError
from attnexp.runs import identity, provenance
from attnexp.runs.folders import choices_of
from attnexp.runs.resolution import judge
from attnexp.runs.settings import config_record


def settings_of(overrides, tmp_path):
    cfg = compose_cfg(overrides, tmp_path)
    record = config_record(cfg)
    return record, identity.key(choices_of(cfg.hydra), record, "code", "data")


def check_composition(args, config_dir):
    return jobs_of(args, config_dir)[0] if jobs_of(args, config_dir) else None


def test_the_identity_counts_settings_not_their_spelling_nor_options_that_cannot_change_a_number(tmp_path):
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
            "trainer.precision=32",  # Lightning's other spelling of the default 32-true
            "+trainer.profiler=simple",
            "callbacks.checkpoint.save_top_k=3",  # more checkpoints kept: the best one is the same
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


def test_the_checkout_says_its_commit(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("no git program to make a repository with")

    def git(*args):
        env = {
            "GIT_AUTHOR_NAME": "a",
            "GIT_AUTHOR_EMAIL": "a@b",
            "GIT_COMMITTER_NAME": "a",
            "GIT_COMMITTER_EMAIL": "a@b",
        }
        subprocess.run(
            ["git", "-C", str(tmp_path), *args], check=True, capture_output=True, env={**env, "PATH": "/usr/bin:/bin"}
        )

    (tmp_path / "notes.txt").write_text("x\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "one")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert provenance.commit(tmp_path) == head.strip()
    git("pack-refs", "--all")  # the branch's ref now lives in packed-refs
    assert provenance.commit(tmp_path) == head.strip()
    assert provenance.commit(tmp_path / "nothing") is None  # not a checkout


def test_the_code_identity_covers_every_file_of_attnexp_and_the_users_modules_with_their_helpers(tmp_path, monkeypatch):
    """An edit anywhere in attnexp (not only in the mixer), or in a helper the user's mixer imports, is another code."""
    package = tmp_path / "site" / "attnexp"
    (package / "data").mkdir(parents=True)
    (package / "data" / "digits.py").write_text("SPLIT = 1\n")
    monkeypatch.setattr(identity, "PACKAGE", package)
    user = tmp_path / "project"
    user.mkdir()
    (user / "scale_helper.py").write_text("SCALE = 1.0\n")
    (user / "my_mixer.py").write_text("from scale_helper import SCALE\n\nclass Mine:\n    scale = SCALE\n")
    monkeypatch.syspath_prepend(str(user))
    import my_mixer  # noqa: F401

    first = identity.code(["my_mixer.Mine"])
    assert set(first["files"]) == {"attnexp/data/digits.py", "my_mixer.py", "scale_helper.py"}
    (user / "scale_helper.py").write_text("SCALE = 2.0\n")
    helper_changed = identity.code(["my_mixer.Mine"])
    (package / "data" / "digits.py").write_text("SPLIT = 2\n")
    attnexp_changed = identity.code(["my_mixer.Mine"])
    assert len({first["id"], helper_changed["id"], attnexp_changed["id"]}) == 3
    assert identity.differing_code(first, attnexp_changed) == ["attnexp/data/digits.py", "scale_helper.py"]


def test_the_users_code_is_what_its_mixer_imports_read_from_the_files_lazy_imports_included(tmp_path):
    """The closure of the mixer module's imports, found in the files (nothing imported): a helper imported inside a
    method counts, a package's relative imports too; another mixer of the same folder, imported by another job of a
    sweep, does not."""
    import sys

    user = tmp_path / "project"
    (user / "ops").mkdir(parents=True)
    (user / "ops" / "__init__.py").write_text("from .kernel import run\n")
    (user / "ops" / "kernel.py").write_text("def run():\n    return 1\n")
    (user / "lazy_helper.py").write_text("SCALE = 1.0\n")
    (user / "mta.py").write_text(
        "import torch\nimport ops\n\nclass Mta:\n    def score(self):\n        from lazy_helper import SCALE\n"
        "        return SCALE\n"
    )
    (user / "retention.py").write_text("class Retention:\n    pass\n")
    before = set(sys.modules)
    files = identity.user_modules(["mta.Mta"], [user])
    assert set(files) == {"mta.py", "lazy_helper.py", "ops/__init__.py", "ops/kernel.py"}, files
    assert set(sys.modules) == before  # read, not imported
    assert set(identity.user_modules(["retention.Retention"], [user])) == {"retention.py"}
    first = identity.code(["mta.Mta"], [user])
    (user / "lazy_helper.py").write_text("SCALE = 2.0\n")
    (user / "retention.py").write_text("class Retention:\n    scale = 2\n")
    assert identity.differing_code(first, identity.code(["mta.Mta"], [user])) == ["lazy_helper.py"]


def test_the_users_folders_are_those_of_its_configs():
    assert identity.user_folders(["file:///a/b/configs", "pkg://x.configs"], Path("/nowhere")) == [Path("/a/b")]


def test_the_code_identity_is_every_source_file_of_the_package_that_runs_and_nothing_beside_it():
    """The files of the imported attnexp package, named from its folder: not a checkout's tests, docs or scripts."""
    import attnexp

    package = Path(attnexp.__file__).parent
    found = {f"attnexp/{p.relative_to(package).as_posix()}" for p in package.rglob("*.py")}
    assert set(identity.code()["files"]) == found and "attnexp/runs/identity.py" in found


def test_the_data_identity_is_the_files_read_by_size_and_hash_wherever_they_lie(tmp_path):
    for place in ("a", "b"):
        (tmp_path / place).mkdir()
        (tmp_path / place / "train.idx").write_bytes(b"\x00" * 10)
    here, there = (identity.dataset({"MNIST/raw/train.idx": tmp_path / p / "train.idx"}) for p in ("a", "b"))
    assert here == there and here["files"]["MNIST/raw/train.idx"]["size"] == 10
    (tmp_path / "b" / "train.idx").write_bytes(b"\x01" * 10)
    assert identity.dataset({"MNIST/raw/train.idx": tmp_path / "b" / "train.idx"})["id"] != here["id"]
    assert identity.dataset({})["id"] == identity.dataset({})["id"]  # generated data: its settings tell it apart


@pytest.mark.parametrize(
    "args,words",
    [
        (
            ["trainer.max_epoch=3"],
            ["trainer.max_epoch is not an option of Trainer", "Did you mean trainer.max_epochs?"],
        ),
        (["data=mnst"], ["data=mnst names no option of the config group data", "Did you mean data=mnist?"]),
        (["mdl.heads=2"], ["Did you mean model.heads?"]),
        (
            ["data=dates", "net.heads=2"],
            ["net.heads is not an option of Seq2Seq", "Did you mean model.heads?"],
        ),
        (["+seed=1"], ["which the config already has: set it without '+' (seed=1)"]),
        (
            ["-m", "model=dot,euclid", "model.eps=0.1"],
            [
                "In the sweep's job model=dot model.eps=0.1",
                "Every job of a sweep gets every key the command sets: sweep together the options that take it, and "
                "the others in a sweep of their own.",
            ],
        ),
        (["-m", "model=euclid,dot", "model.eps=0.1"], ["In the sweep's job model=dot model.eps=0.1"]),
        (["resume=flase"], ["resume=flase is not allowed", "not a valid bool"]),
        (["test=maybe"], ["test=maybe is not allowed", "not a valid bool"]),
        (
            ["trainer.max_time=00:00:05:00"],
            ["an option of Trainer (pytorch_lightning.Trainer) that the config does not list: add it with +trainer"],
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


def test_a_key_given_twice_composes_as_hydra_composes_it():
    cfg = check_composition(["seed=1", "seed=1", "trainer.max_epochs=2"], CONFIG_DIR)
    assert (cfg.seed, cfg.trainer.max_epochs) == (1, 2)


def test_a_sweep_a_config_defines_is_checked_as_the_jobs_hydra_runs():
    """``experiment=diagnostics`` sweeps five data sets in its ``hydra.sweeper.params``: the pre-flight stage checks
    every job the basic sweeper makes of them and of the command line, in its order."""
    jobs = jobs_of(["--multirun", "experiment=diagnostics", "model=dot,euclid", "seed=0"], CONFIG_DIR)
    made = [(j.hydra.runtime.choices.data, j.hydra.runtime.choices.model) for j in jobs]
    data = ["mqar", "recall", "selective_copy", "listops", "seqops"]
    assert made == [(d, m) for d in data for m in ("dot", "euclid")]
    alone = jobs_of(["--multirun", "experiment=diagnostics", "data=recall", "model=dot"], CONFIG_DIR)
    assert [j.hydra.runtime.choices.data for j in alone] == ["recall"]  # the command line's value wins


def test_a_library_outside_this_interpreters_site_packages_is_installed_not_the_users(tmp_path, monkeypatch):
    """Packages reached through --system-site-packages, a .pth file or a pip --target folder are libraries: a config's
    target in one (an optimizer, a callback) is named by its version, its files are not read as the user's code (the
    walk read 5,400 of torch's files, 50 s a run, in a virtual environment that reuses another's packages)."""
    libs, user = tmp_path / "libs", tmp_path / "project"
    (libs / "fakelib").mkdir(parents=True)
    (libs / "fakelib-1.0.dist-info").mkdir()
    (libs / "fakelib" / "__init__.py").write_text("from fakelib import sub\n\nclass Optimizer:\n    pass\n")
    (libs / "fakelib" / "sub.py").write_text("X = 1\n")
    user.mkdir()
    (user / "mixer.py").write_text("import fakelib\n\nclass Mine:\n    pass\n")
    monkeypatch.syspath_prepend(str(libs))
    assert identity.user_modules(["fakelib.Optimizer", "mixer.Mine"], [user]) == {"mixer.py": user / "mixer.py"}
