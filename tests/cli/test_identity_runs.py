"""A run's identity from its mixer's imports: the same in a sweep and alone, a helper imported inside a method
included, another job's mixer left out; a run killed without a word is said to be abandoned."""

from __future__ import annotations

import signal

from helpers import read_metrics, run_cli, run_dirs, start, wait_for_epochs

BUDGET = ["trainer.max_epochs=1", "trainer.limit_train_batches=2", "callbacks.progress_bar.refresh_rate=0"]
MIXER = """
from attnexp.mixers import DotAttention


class {name}(DotAttention):
    def score(self, q, k):
        from lazy_scale import SCALE  # imported where it is used

        return super().score(q, k) * SCALE
"""


def project(root):
    (root / "configs" / "model").mkdir(parents=True)
    for name in ("first", "second"):
        (root / f"{name}.py").write_text(MIXER.format(name=name.capitalize()))
        (root / "configs" / "model" / f"{name}.yaml").write_text(
            f"_target_: {name}.{name.capitalize()}\n_partial_: true\n"
        )
    (root / "lazy_scale.py").write_text("SCALE = 1.0\n")
    return root


def test_a_mixers_identity_is_its_own_imports_in_a_sweep_and_alone(tmp_path):
    folder = project(tmp_path)
    run_cli(folder, "--multirun", "model=first,second", *BUDGET, "hydra/launcher=basic")
    runs = {read_metrics(r)["mixer"]: r for r in run_dirs(folder / "outputs" / "runs")}
    user_files = {
        m: sorted(f for f in read_metrics(r)["code"]["files"] if not f.startswith("attnexp/")) for m, r in runs.items()
    }
    assert user_files == {"first": ["first.py", "lazy_scale.py"], "second": ["lazy_scale.py", "second.py"]}
    alone = run_cli(folder, "model=first", *BUDGET)
    assert "already finished" in alone.stderr and len(run_dirs(folder / "outputs" / "runs")) == 2, alone.stderr
    (folder / "second.py").write_text((folder / "second.py").read_text() + "\n# edited\n")
    assert "already finished" in run_cli(folder, "model=first", *BUDGET).stderr  # another mixer's edit: not its code
    (folder / "lazy_scale.py").write_text("SCALE = 2.0\n")  # the helper it imports in a method: its code
    again = run_cli(folder, "model=first", *BUDGET)
    assert "already finished" not in again.stderr and len(run_dirs(folder / "outputs" / "runs")) == 3, again.stderr


def test_a_run_killed_without_a_word_is_refused_as_abandoned_not_running(tmp_path):
    proc = start(tmp_path, "trainer.max_epochs=300", "callbacks.progress_bar.refresh_rate=0")
    try:
        wait_for_epochs(tmp_path, proc, 1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    again = run_cli(tmp_path, "trainer.max_epochs=300", "callbacks.progress_bar.refresh_rate=0", check=False)
    assert again.returncode == 2 and "(status abandoned): add resume=true" in again.stderr, again.stderr
