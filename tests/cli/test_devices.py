"""More training processes on the CPU than the machine has cores: refused before anything is written, unless the
command names the CPU."""

from __future__ import annotations

import pytest
from helpers import run_cli

from attnexp.cli import hardware, preflight
from attnexp.cli.train import CONFIG_DIR


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(hardware, "cores", lambda: 2)


def test_more_cpu_processes_than_cores_are_refused_before_anything_is_written(tmp_path, two_cores):
    proc = run_cli(tmp_path, "trainer.devices=5", check=False)
    assert proc.returncode == 2, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "trainer.devices=5 starts 5 training processes on the CPU, which has 2 cores" in said, said
    assert "trainer.accelerator=cpu trainer.devices=5" in said and said.count("Bad input") == 1
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("named", ["trainer.accelerator=cpu", "trainer=cpu"])
def test_naming_the_cpu_starts_them_anyway(named, tmp_path, two_cores, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (job,) = preflight.check([named, "trainer.devices=5"], CONFIG_DIR)
    assert job.trainer.devices == 5


def test_as_many_processes_as_cores_need_no_word(tmp_path, two_cores, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (job,) = preflight.check(["trainer=ddp"], CONFIG_DIR)
    assert job.trainer.devices == 2
