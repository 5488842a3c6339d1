"""Shared fixtures: run the CLI in a temp dir; one torch thread in every test process."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli

SLOW_TIERS = ("fits", "cli")  # folders of whole training runs: the slow tier (pytest -m "not slow" leaves them out)


def pytest_configure(config: pytest.Config) -> None:
    """One torch thread in every test process (each xdist worker too), as the command-line tests' runs have: tiny
    models are faster on one thread, and a worker's two threads spin against the other worker and the runs it starts
    (on two cores, a fit that takes 3 s alone took 47 s)."""
    import torch

    torch.set_num_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(item.fspath).parent.name in SLOW_TIERS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def cli(tmp_path):
    """``cli(*overrides)`` runs attnexp in a fresh temp dir and returns that dir."""

    def _run(*overrides: str, check: bool = True, env: dict | None = None):
        proc = run_cli(tmp_path, *overrides, check=check, env=env)
        return tmp_path, proc

    return _run
