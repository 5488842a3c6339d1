"""The unit tier's checks of euclid's Triton kernel (tests/euclid_kernel_cases.py), run on CUDA."""

from __future__ import annotations

import pytest
import torch
from euclid_kernel_cases import *  # noqa: F403 (the shared checks, collected here with the device below)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]


@pytest.fixture
def device() -> str:
    return "cuda"
