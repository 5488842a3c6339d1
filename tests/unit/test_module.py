"""The Lightning module: no host syncs in a training call, attributes behave as on any nn.Module, a cheap CUDA check
(``compile`` changing nothing but speed: tests/compilers/test_module_compile.py)."""

from __future__ import annotations

import os
from functools import partial

import pytest
import torch

from attnexp.mixers import DotAttention
from attnexp.networks import PatchClassifier
from attnexp.tasks import ImageClassification
from attnexp.training.module import TaskModule


def module(compile: bool = False) -> TaskModule:
    torch.manual_seed(0)
    net = PatchClassifier(partial(DotAttention, heads=1), image_size=8, channels=1, patch_size=2, num_classes=10)
    return TaskModule(net, ImageClassification(), optimizer=partial(torch.optim.Adam, lr=1e-3), compile=compile)


def batch(n: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    return torch.randn(n, 16, 4), torch.randint(0, 10, (n,))


def test_attributes_register_as_on_any_module():
    """The direct path for plain attributes leaves parameters, submodules and buffers registered."""
    m = module()
    m.train_count, m._current_fx_name = 7, "training_step"
    assert (m.train_count, m._current_fx_name) == (7, "training_step") and "train_count" not in m._buffers
    m.train_count = torch.nn.Parameter(torch.ones(2))  # a plain attribute becomes a parameter
    assert "train_count" in m._parameters and "train_count" not in vars(m)
    m.head = torch.nn.Linear(2, 2)
    m.head = torch.nn.Identity()
    assert isinstance(m._modules["head"], torch.nn.Identity) and "head" not in vars(m)
    m.train_loss_sum = torch.full((), 3.0)
    assert m._buffers["train_loss_sum"] == 3.0 and "train_loss_sum" not in vars(m)
    with pytest.raises(TypeError):
        m.train_loss_sum = 3.0  # a buffer takes tensors only, as on nn.Module


@pytest.mark.parametrize(
    ("env", "driver", "hip", "after"),
    [("1", False, None, "0"), ("1", True, None, "1"), (None, False, None, None), ("1", False, "6.2", "1")],
    ids=["no-driver", "driver", "lightning-absent", "rocm"],
)
def test_nvml_cuda_check_is_undone_only_without_a_driver(monkeypatch, env, driver, hip, after):
    """Without a driver, Lightning's NVML-based check would try to load libnvidia-ml at every optimizer step."""
    from attnexp.cli import hardware as cuda_check

    monkeypatch.setattr(torch.version, "hip", hip)
    monkeypatch.setattr(cuda_check, "nvidia_driver", lambda: driver)
    if env is None:
        monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    else:
        monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", env)
    assert cuda_check.plain_cuda_check_without_driver() is (after == "0")
    assert os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") == after
