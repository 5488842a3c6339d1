"""``module.compile``: the compiled module keeps the eager one's checkpoint keys and outputs."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from attnexp.mixers import DotAttention
from attnexp.networks import PatchClassifier
from attnexp.tasks import ImageClassification
from attnexp.training.module import TaskModule


def module(compile: bool) -> TaskModule:
    torch.manual_seed(0)
    net = PatchClassifier(partial(DotAttention, heads=1), image_size=8, channels=1, patch_size=2, num_classes=10)
    return TaskModule(net, ImageClassification(), optimizer=partial(torch.optim.Adam, lr=1e-3), compile=compile)


@pytest.mark.filterwarnings("ignore")
def test_compile_keeps_checkpoint_keys_and_outputs():
    eager, compiled = module(compile=False), module(compile=True)
    assert list(eager.state_dict()) == list(compiled.state_dict())
    compiled.load_state_dict(eager.state_dict())
    x = torch.randn(5, 16, 4, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(compiled(x), eager(x), atol=1e-5, rtol=1e-5)
