"""Every benchmark script still imports what it uses (their numbers are taken by hand, their imports here)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from helpers import REPO

SCRIPTS = sorted((REPO / "scripts").glob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_script_imports(script: Path, monkeypatch):
    """Each script runs from its folder (a helper module beside it is imported by name); one run as a command has
    its main()."""
    monkeypatch.syspath_prepend(str(script.parent))
    namespace = runpy.run_path(str(script), run_name="imported_by_tests")  # the `__main__` block does not run
    assert callable(namespace.get("main")) or '__name__ == "__main__"' not in script.read_text()
