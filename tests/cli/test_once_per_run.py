"""A run's work is done once: attnexp composes its config once (Hydra composes its own), hashes its code once and
builds one data module, however many places ask for them (the pre-flight stage, Hydra's folder resolver, the
record)."""

from __future__ import annotations

import collections

from helpers import run_cli

from attnexp.cli import preflight
from attnexp.data import DigitsDataModule
from attnexp.runs import identity


def test_a_run_composes_hashes_and_reads_its_data_once(tmp_path, monkeypatch):
    calls: collections.Counter[str] = collections.Counter()

    def counted(owner, name: str, label: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            calls[label] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    counted(preflight, "composed", "compositions")
    counted(identity, "code", "code hashed")
    counted(DigitsDataModule, "__init__", "data modules")
    run_cli(tmp_path, "trainer.max_epochs=1", "trainer.limit_train_batches=2", "callbacks.progress_bar.refresh_rate=0")
    assert sorted(calls.items()) == [("code hashed", 1), ("compositions", 1), ("data modules", 1)]
