"""Euclid's Triton kernel in the unit tier: its checks (tests/euclid_kernel_cases.py) on the CPU under Triton's
interpreter, in a process of their own (Triton reads ``TRITON_INTERPRET`` when it is first imported, and the test
processes have imported it by then: torch._dynamo does), and the package without Triton."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from helpers import REPO, TEST_ENV

from attnexp.mixers import EuclidAttention
from attnexp.mixers.euclid.ops.kernel import operator as kernel


def test_the_kernel_passes_its_checks_under_the_interpreter():
    pytest.importorskip("triton")
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "tests/euclid_kernel_cases.py",
        ],
        cwd=REPO,
        env={**os.environ, **TEST_ENV, "PYTHONPATH": pythonpath, "TRITON_INTERPRET": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]


def test_without_triton_the_package_works_and_no_device_gets_the_kernel(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # import triton raises ImportError
    assert not kernel.has_triton.__wrapped__()
    monkeypatch.setattr(kernel, "has_triton", kernel.has_triton.__wrapped__)
    assert not kernel.available(torch.device("cuda"))
    assert EuclidAttention(8, heads=2)(torch.randn(2, 5, 8))[0].shape == (2, 5, 8)


def test_the_kernel_is_for_gpus():
    """On a CPU the mixer runs its torch path (the interpreter is for tests: far too slow to train with)."""
    assert not kernel.available(torch.device("cpu")) and not kernel.available(torch.device("meta"))
