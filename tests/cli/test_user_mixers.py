"""A mixer from outside attnexp, the Hydra way: found in the working directory's configs/ or through an installed
package's entry point, listed by --help, checked before any run folder exists, and its options left to it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import REPO, run_script

MIXER = '''
from attnexp.mixers import DotAttention


class MineAttention(DotAttention):
    """dot attention under another name."""
'''


def user_folder(root: Path, target: str = "mine_attention.MineAttention", name: str = "mine") -> Path:
    """A folder as a user keeps it: a module, and configs/model/<name>.yaml naming a class in it."""
    (root / "configs" / "model").mkdir(parents=True, exist_ok=True)
    (root / "configs" / "model" / f"{name}.yaml").write_text(f"_target_: {target}\n_partial_: true\nheads: 1\n")
    (root / "mine_attention.py").write_text(MIXER)
    return root


SCRIPTS = {"attnexp.cli.train": "attnexp", "attnexp.cli.check": "attnexp-check"}


def attnexp(
    cwd: Path, *args: str, pythonpath: str = "", module: str = "attnexp.cli.train"
) -> subprocess.CompletedProcess:
    """A command in ``cwd``; ``pythonpath``: an installed package's folder (pip's --target)."""
    return run_script(cwd, SCRIPTS[module], *args, env={"PYTHONPATH": pythonpath} if pythonpath else None)


def model_line(help_text: str) -> list[str]:
    line = next(x for x in help_text.splitlines() if x.startswith("model: "))
    return line.removeprefix("model: ").split(", ")


def test_the_working_directory_configs_are_on_the_search_path_and_in_help(tmp_path):
    folder = user_folder(tmp_path)
    proc = attnexp(folder, "--help")
    assert "mine" in model_line(proc.stdout) and "dot" in model_line(proc.stdout), proc.stdout[-2000:]
    job = attnexp(folder, "model=mine", "--cfg", "job")
    assert "_target_: mine_attention.MineAttention" in job.stdout, job.stderr[-2000:]


def test_an_installed_package_adds_its_configs_through_an_entry_point(tmp_path):
    """A package (here a distribution on the path, as pip leaves one) names its config package under attnexp.configs."""
    site = tmp_path / "site"
    (site / "mine_pkg" / "configs" / "model").mkdir(parents=True)
    (site / "mine_pkg" / "__init__.py").write_text(MIXER)
    (site / "mine_pkg" / "configs" / "__init__.py").write_text("")
    (site / "mine_pkg" / "configs" / "model" / "from_pkg.yaml").write_text(
        "_target_: mine_pkg.MineAttention\n_partial_: true\n"
    )
    info = site / "mine_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mine-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[attnexp.configs]\nmine_pkg = mine_pkg.configs\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = attnexp(elsewhere, "--help", pythonpath=str(site))
    assert "from_pkg" in model_line(proc.stdout), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "from_pkg" not in model_line(attnexp(elsewhere, "--help").stdout)  # not installed: not there


def test_the_repository_configs_are_not_added_twice(tmp_path):
    proc = attnexp(REPO, "--help")
    options = model_line(proc.stdout)
    assert len(options) == len(set(options)) and "sigmoid" in options


def no_run_folder(root: Path) -> bool:
    return not list(root.rglob("metrics.json")) and not list(root.rglob(".hydra"))


def test_a_module_that_cannot_be_found_is_named_with_the_folders_searched_before_any_folder(tmp_path):
    folder = user_folder(tmp_path, target="not_here.MineAttention")
    proc = attnexp(folder, "model=mine")
    assert proc.returncode == 2, proc.stderr[-2000:]
    message = " ".join(proc.stderr.split())
    for words in (
        "model._target_ names not_here.MineAttention",
        "no module 'not_here'",
        f"{folder} (holds a configs/ folder)",
        "PYTHONPATH",
        "Nothing was run or written",
    ):
        assert words in message, message[-2000:]
    assert "Traceback" not in proc.stderr and no_run_folder(folder)


@pytest.mark.parametrize(
    "target,words",
    [
        ("mine_attention.MineAtention", "has no 'MineAtention'"),
        ("broken_module.Mixer", "importing it failed: ModuleNotFoundError: No module named 'missing_dependency'"),
    ],
)
def test_a_module_that_cannot_be_loaded_says_why_before_any_folder(tmp_path, target, words):
    folder = user_folder(tmp_path, target=target)
    (folder / "broken_module.py").write_text("import missing_dependency\n")
    proc = attnexp(folder, "model=mine")
    assert proc.returncode == 2 and words in " ".join(proc.stderr.split()), proc.stderr[-2000:]
    assert no_run_folder(folder)


def test_a_sweep_checks_every_mixer_it_names_before_any_folder(tmp_path):
    folder = user_folder(tmp_path, target="not_here.MineAttention")
    proc = attnexp(folder, "--multirun", "model=dot,mine", "seed=0,1")
    assert proc.returncode == 2 and "no module 'not_here'" in proc.stderr, proc.stderr[-2000:]
    assert no_run_folder(folder) and not list(folder.rglob("model=dot"))


def test_a_bare_target_override_is_refused_with_the_recipe(tmp_path):
    folder = user_folder(tmp_path)
    proc = attnexp(folder, "model._target_=mine_attention.MineAttention")
    message = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and "would run that class under the name of the model option" in message, message[
        -2000:
    ]
    assert "configs/model/NAME.yaml" in message and "'_target_: mine_attention.MineAttention'" in message
    assert no_run_folder(folder)


def test_the_kit_explains_a_mixer_it_cannot_build_instead_of_checking_it(tmp_path):
    proc = attnexp(tmp_path, "model=euclid", "model.eps=-1", module="attnexp.cli.check")
    assert proc.returncode == 2 and "model.eps=-1 is not allowed" in proc.stderr and "PASS" not in proc.stdout, (
        proc.stderr[-2000:]
    )
    folder = user_folder(tmp_path / "user", target="not_here.MineAttention")
    proc = attnexp(folder, "model=mine", module="attnexp.cli.check")
    assert proc.returncode == 2 and "no module 'not_here'" in proc.stderr, proc.stderr[-2000:]


def test_an_option_named_like_a_built_in_one_is_reported_as_hidden(tmp_path):
    """A user's configs/model/dot.yaml would silently run attnexp's dot: the commands say so."""
    folder = user_folder(tmp_path, name="dot")
    proc = attnexp(folder, "--help")
    assert f"{folder.resolve()}/configs/model/dot.yaml: attnexp has options of these names" in proc.stderr, proc.stderr[
        -2000:
    ]
    assert "attnexp has options of these names" not in attnexp(user_folder(tmp_path / "other"), "--help").stderr


WITH_OPTIONS = '''
from pathlib import Path

from attnexp.mixers import DotAttention


class MineAttention(DotAttention):
    """dot attention with options of its own; it fails in training while a file named 'fail' is beside it."""

    def __init__(self, dim, kernel_q: int = 3, kernel_k: int = 5, **options):
        super().__init__(dim, **options)
        self.kernel_q, self.kernel_k = kernel_q, kernel_k

    def forward(self, x, context=None, mask=None, need_weights=False):
        if self.training and Path("fail").exists():
            raise RuntimeError("this mixer cannot train yet")
        return super().forward(x, context, mask, need_weights)
'''


@pytest.mark.parametrize("command", ["attnexp", "attnexp-check"])
@pytest.mark.parametrize("given", ["model.kernal_q=3", "+model.kernal_q=3"])
def test_an_option_the_mixer_does_not_take_names_its_class_and_the_nearest(tmp_path, command, given):
    """A typo of an option the user's mixer has: its class, where it is defined and its options, never Hydra's advice
    to add the key with '+' (which the class would refuse with a traceback)."""
    folder = user_folder(tmp_path)
    (folder / "mine_attention.py").write_text(WITH_OPTIONS)
    proc = run_script(folder, command, "model=mine", given)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    message = " ".join(proc.stderr.split())
    for words in (
        "model.kernal_q is not an option of MineAttention (mine_attention.py:7); its options are heads,",
        "kernel_q, kernel_k,",
        "Did you mean model.kernel_q?",
        "Nothing was run or written",
    ):
        assert words in message, message
    assert "Traceback" not in proc.stderr and "To append" not in proc.stderr and no_run_folder(folder)


def test_an_option_the_mixer_takes_but_its_config_does_not_list_is_added_with_a_plus(tmp_path):
    folder = user_folder(tmp_path)
    (folder / "mine_attention.py").write_text(WITH_OPTIONS)
    proc = attnexp(folder, "model=mine", "model.kernel_q=2")
    assert proc.returncode == 2 and "add it with +model.kernel_q=2" in " ".join(proc.stderr.split()), proc.stderr
    proc = attnexp(folder, "model=mine", "+model.kernel_q=2", "trainer.max_epochs=1", "trainer.limit_train_batches=2")
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_run_that_failed_before_its_first_checkpoint_runs_again_when_asked_again(tmp_path):
    folder = user_folder(tmp_path)
    (folder / "mine_attention.py").write_text(WITH_OPTIONS)
    (folder / "fail").touch()
    budget = [
        "model=mine",
        "trainer.max_epochs=1",
        "trainer.limit_train_batches=2",
        "callbacks.progress_bar.refresh_rate=0",
    ]
    first = attnexp(folder, *budget)
    assert first.returncode == 1 and "this mixer cannot train yet" in first.stderr, first.stderr[-2000:]
    (folder / "fail").unlink()  # the user fixes the mixer
    again = attnexp(folder, *budget)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "stopped before its first checkpoint" in again.stderr and "runs again from the start" in again.stderr


def test_a_search_path_folder_is_checked_without_a_false_error(tmp_path):
    """``hydra.searchpath`` names the folder from elsewhere: the kit passes and stderr holds no error (the identity of
    the run reads the user's code from its files: nothing is imported before the folder is importable)."""
    folder = user_folder(tmp_path / "mine")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = attnexp(
        elsewhere, "model=mine", f"hydra.searchpath=[file://{folder}/configs]", "--no-speed", module="attnexp.cli.check"
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Error" not in proc.stderr and "ModuleNotFoundError" not in proc.stderr, proc.stderr
