"""Shared fixtures: run the CLI in a temp dir, compose configs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Tiny models run fastest on one thread, and parallel test processes then do not fight over cores.
TEST_ENV = {"PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
FAST = ["trainer.max_epochs=1", "trainer.limit_train_batches=3", "callbacks.progress_bar.refresh_rate=0"]


def run_cli(cwd: Path, *overrides: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``attnexp`` (the console script's module) with ``overrides`` in ``cwd``."""
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    full_env = {**os.environ, **TEST_ENV, "PYTHONPATH": pythonpath, **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "attnexp.cli.train", *overrides],
        cwd=cwd, env=full_env, capture_output=True, text=True, timeout=600,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"attnexp {' '.join(overrides)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def run_dirs(root: Path) -> list[Path]:
    """Every run folder (one holding metrics.json) under ``root``, sorted."""
    return sorted(p.parent for p in root.rglob("metrics.json"))


def read_metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.fixture
def cli(tmp_path):
    """``cli(*overrides)`` runs attnexp in a fresh temp dir and returns that dir."""

    def _run(*overrides: str, check: bool = True, env: dict | None = None):
        proc = run_cli(tmp_path, *overrides, check=check, env=env)
        return tmp_path, proc

    return _run


@pytest.fixture
def one_thread():
    """Tiny models are faster on one thread than on two fighting over shared cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
