"""Shared fixtures: run the CLI in a temp dir, one torch thread."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli

SLOW_TIERS = ("fits", "cli")  # folders of whole training runs: the slow tier (pytest -m "not slow" leaves them out)


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


@pytest.fixture
def one_thread():
    """Tiny models are faster on one thread than on two fighting over shared cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
