"""The command line answers --help, --cfg and config-level bad input without importing torch: what a process imports
before a run is built."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
sys.argv = ["attnexp", *sys.argv[1:]]
import attnexp.cli.compare, attnexp.cli.predict, attnexp.cli.sweep  # noqa: F401
from attnexp.cli.train import cli
try:
    cli()
except SystemExit as stop:
    print("exit", stop.code)
heavy = sorted(m for m in ("torch", "pytorch_lightning", "torchmetrics", "torchvision", "matplotlib")
               if m in sys.modules)
print("heavy:", ",".join(heavy) or "none")
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["model=euclid", "--cfg", "job"],
        ["--info"],
        ["net.depth=0"],
        ["data.val_size=0"],
        ["trainer.max_epochs=abc"],
    ],
)
def test_no_heavy_import_before_a_run_is_built(args, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert "heavy: none" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    if "=" in args[-1]:  # a bad value: explained, exit status 2
        assert "exit 2" in proc.stdout and "is not allowed" in proc.stderr, proc.stderr[-2000:]


def test_a_mixer_option_is_checked_by_the_mixer(tmp_path):
    """A mixer's own options are its to check (the euclid score is 1/(distance + eps)): explained, exit status 2."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "model=euclid", "model.eps=-1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert "exit 2" in proc.stdout and "model.eps=-1 is not allowed" in proc.stderr, proc.stderr[-2000:]
