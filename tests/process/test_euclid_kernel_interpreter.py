"""Euclid's Triton kernel in the unit tier: its checks (tests/euclid_kernel_cases.py) on the CPU under Triton's
interpreter, in a process of their own (Triton reads ``TRITON_INTERPRET`` when it is first imported, and the test
processes have imported it by then: torch._dynamo does), and the package without Triton."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from helpers import REPO, user_env

from attnexp.mixers.euclid.ops.kernel import operator as kernel


def test_the_kernel_passes_its_checks_under_the_interpreter():
    pytest.importorskip("triton")
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
        env={**user_env(), "TRITON_INTERPRET": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]


def test_without_triton_the_package_imports_and_runs_its_torch_path():
    """A process where Triton cannot be imported: attnexp imports, no device gets the kernel, euclid trains a step."""
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import torch\n"
        "from attnexp.mixers import EuclidAttention\n"
        "from attnexp.mixers.euclid.ops.kernel import operator\n"
        "assert not operator.HAS_TRITON and not operator.available(torch.device('cuda'))\n"
        "attn = EuclidAttention(8, heads=2)\n"
        "attn(torch.randn(2, 5, 8, requires_grad=True))[0].sum().backward()\n"
        "assert attn.q_proj.weight.grad is not None\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_the_kernel_is_for_gpus():
    """On a CPU the mixer runs its torch path (the interpreter is for tests: far too slow to train with)."""
    assert not kernel.available(torch.device("cpu")) and not kernel.available(torch.device("meta"))
