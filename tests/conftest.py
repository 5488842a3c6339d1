"""Shared fixtures: run the CLI in a temp dir; one torch thread in every test process."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli

# The tiers, by folder: unit (the inner loop, about a minute); compilers (torch.compile and offline Triton compiles);
# fits (training runs in this process); cli (the commands in this process); process (what a process is the subject
# of: signals, kills, two writers, installs, start-up imports, Triton's interpreter, each console script once); user
# (the documented commands).
SLOW_TIERS = ("fits", "cli", "process", "user")  # whole training runs: pytest -m "not slow" leaves them out
MARKED = ("compilers", "process", "user")  # a marker per tier of these: pytest -m "not compilers", -m process


def pytest_configure(config: pytest.Config) -> None:
    """The commands under test are this checkout's, installed (the tests start the console scripts as a user's shell
    does, with no PYTHONPATH). One torch thread in every test process (each xdist worker too) for what the tests run
    in-process: a worker's two threads spin against the other worker and the commands it starts (on two cores, a fit
    that takes 3 s alone took 47 s). The commands themselves get the machine's default."""
    import torch

    import attnexp

    where = Path(attnexp.__file__).resolve().parents[1]
    if where != Path(__file__).resolve().parents[1]:
        pytest.exit(f"attnexp is installed from {where}, not from this checkout: pip install -e '.[test]' here.", 2)
    torch.set_num_threads(1)


FIRST = ("user", "process", "cli", "compilers", "fits")  # the longest first: on few cores the quick ones fill in


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {tier: i for i, tier in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(Path(item.fspath).parent.name, len(FIRST)))  # stable: files keep their order
    for item in items:
        tier = Path(item.fspath).parent.name
        if tier in SLOW_TIERS:
            item.add_marker(pytest.mark.slow)
        if tier in MARKED:
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture
def cli(tmp_path):
    """``cli(*overrides)`` runs attnexp in a fresh temp dir and returns that dir."""

    def _run(*overrides: str, check: bool = True, env: dict | None = None):
        proc = run_cli(tmp_path, *overrides, check=check, env=env)
        return tmp_path, proc

    return _run


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The user's tier's own time, whatever else ran beside it (CI records it)."""
    reports = [r for kind in ("passed", "failed") for r in terminalreporter.stats.get(kind, [])]
    user = [r for r in reports if getattr(r, "when", "") == "call" and "tests/user/" in r.nodeid]
    if user:
        total = sum(r.duration for r in user)
        terminalreporter.write_line(
            f"user's tier: {len(user)} tests, {total:.0f} s of test time ({total / 60:.1f} min)"
        )
