"""Build a token mixer from a config factory (a ``functools.partial``)."""

from __future__ import annotations

import inspect
from typing import Any, Callable

from torch import nn


def build_mixer(factory: Callable[..., nn.Module], dim: int, **offered: Any) -> nn.Module:
    """Call ``factory(dim=dim, ...)`` with those ``offered`` arguments the mixer accepts.

    A network offers what it knows (``num_tokens``, ``out_proj``, ``causal``);
    attention takes ``out_proj``, the dense MLP mixer takes ``num_tokens``.
    """
    accepted = inspect.signature(factory).parameters
    return factory(dim=dim, **{k: v for k, v in offered.items() if k in accepted})
