"""The commands from Python (docs/python.md): ``attnexp.run`` and the others return what the command made, and a second
call in the same process gets what a fresh process would: an edited mixer's file is imported anew (another identity,
another folder), a changed setting finds its own folder, and the process is left as it was before the first call."""

from __future__ import annotations

import logging
import os
import signal
import sys
import warnings

import pytest
import torch
from helpers import FAST

import attnexp
from attnexp.errors import CommandFailed

MIXER = """from attnexp.mixers import MultiHeadAttention


class MyAttention(MultiHeadAttention):
    def score(self, q, k):
        {body}
"""
DOT = "return (q @ k.transpose(-2, -1)) * self.head_dim**-0.5"


def process_state() -> dict:
    """What a command could leave changed in this process."""
    return {
        "threads": torch.get_num_threads(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "signals": {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)},
        "sys.path": list(sys.path),
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
        "environ": dict(os.environ),
        "root handlers": list(logging.getLogger().handlers),
        "warning filters": list(warnings.filters),
        "showwarning": warnings.showwarning,
        "torch random": torch.random.get_rng_state(),
    }


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A user's folder with a mixer of their own (model=mine), the working folder of the calls."""
    (tmp_path / "configs" / "model").mkdir(parents=True)
    (tmp_path / "configs" / "model" / "mine.yaml").write_text("_target_: my_attention.MyAttention\n_partial_: true\n")
    (tmp_path / "my_attention.py").write_text(MIXER.format(body=DOT))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_two_calls_in_one_process_get_what_two_processes_would(folder):
    before = process_state()
    first = attnexp.run(["model=mine", *FAST])
    assert first["status"] == "ok" and first["mixer"] == "mine"
    assert process_state().keys() == before.keys()
    for key, value in process_state().items():
        same = torch.equal(value, before[key]) if isinstance(value, torch.Tensor) else value == before[key]
        assert same, key
    assert "my_attention" not in sys.modules  # imported by the call, forgotten after it

    (folder / "my_attention.py").write_text(MIXER.format(body='raise RuntimeError("the edited score")'))
    edited = attnexp.run(["model=mine", *FAST])
    assert edited["identity"] != first["identity"] and edited["status"] == "failed"
    assert "the edited score" in edited["error"]  # the file as it is now ran, not the first call's module

    (folder / "my_attention.py").write_text(MIXER.format(body=DOT))
    again = attnexp.run(["model=mine", *FAST])  # the first file again: the first run's folder, found finished
    assert again == first
    wider = attnexp.run(["model=mine", "net.dim=8", *FAST])
    assert wider["identity"] != first["identity"] and wider["status"] == "ok"
    runs = sorted(p.parent.name for p in (folder / "outputs" / "runs").glob("*/seed=0"))
    assert len(runs) == 3 and len({name.rsplit("_", 1)[1] for name in runs}) == 3  # three identities, three folders
    for key, value in process_state().items():
        same = torch.equal(value, before[key]) if isinstance(value, torch.Tensor) else value == before[key]
        assert same, key


def test_the_callers_own_import_of_a_mixer_stays_the_callers(folder, monkeypatch):
    monkeypatch.syspath_prepend(str(folder))
    import my_attention

    (folder / "my_attention.py").write_text(MIXER.format(body='raise RuntimeError("the edited score")'))
    record = attnexp.run(["model=mine", *FAST])
    assert record["status"] == "failed" and "the edited score" in record["error"]  # the file, not the caller's module
    assert sys.modules["my_attention"] is my_attention
    monkeypatch.delitem(sys.modules, "my_attention")


def test_each_call_returns_what_its_command_made(folder):
    records = attnexp.run(["--multirun", "model=dot,mine", *FAST, "hydra/launcher=basic"])
    assert [r["mixer"] for r in records] == ["dot", "mine"] and {r["status"] for r in records} == {"ok"}
    assert attnexp.run(["model=dot", "--cfg", "job"]) is None

    report = attnexp.check(["model=mine", "--no-speed"])
    assert report["passed"] and {c["name"] for c in report["checks"]} >= {"smoke run", "no causal leak"}
    assert report["lines"][-1].startswith(f"{len(report['checks'])} checks: all passed")

    comparison = attnexp.compare([str(folder / "outputs" / "runs"), "--out", str(folder / "cmp")])
    (table,) = comparison.tables
    assert {row.config for row in table.rows} == {"model=dot", "model=mine"}

    with pytest.raises(CommandFailed, match="model=nope names no option of the config group model") as refused:
        attnexp.run(["model=nope"])
    assert refused.value.status == 2 and not (folder / "outputs" / "runs" / "nope").exists()
    with pytest.raises(CommandFailed, match="attnexp-compare: no such folder: nowhere"):
        attnexp.compare(["nowhere"])
