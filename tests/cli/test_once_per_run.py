"""A run's work is done once: attnexp composes its config once (Hydra composes its own), hashes its code once and
builds one data module, however many places ask for them (the pre-flight stage, Hydra's folder resolver, the
record)."""

from __future__ import annotations

import subprocess
import sys

from helpers import user_env

PROBE = """
import collections, sys
calls = collections.Counter()

def counted(owner, name, label):
    original = getattr(owner, name)
    def wrapper(*args, **kwargs):
        calls[label] += 1
        return original(*args, **kwargs)
    setattr(owner, name, wrapper)

import hydra
from attnexp.runs import identity
from attnexp.cli import preflight
from attnexp.data import DigitsDataModule
counted(preflight, "composed", "compositions")
counted(identity, "code", "code hashed")
original_init = DigitsDataModule.__init__
def init(self, *args, **kwargs):
    calls["data modules"] += 1
    original_init(self, *args, **kwargs)
DigitsDataModule.__init__ = init
sys.argv = ["attnexp", "trainer.max_epochs=1", "trainer.limit_train_batches=2", "callbacks.progress_bar.refresh_rate=0"]
from attnexp.cli.train import cli
try:
    cli()
except SystemExit as stop:
    assert not stop.code, stop.code
print(sorted(calls.items()))
"""


def test_a_run_composes_hashes_and_reads_its_data_once(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tmp_path, env=user_env(), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == str([("code hashed", 1), ("compositions", 1), ("data modules", 1)])
