"""What a network asks of a mixer (:class:`MixerRequest`), and how a mixer is told from other modules by it: the
requests it keeps (:func:`is_mixer`). Its own module, below the contract and the tracing of a mixer's values."""

from __future__ import annotations

from typing import NamedTuple

from torch import nn


class MixerRequest(NamedTuple):
    """The network's requests, as a mixer received them."""

    dim: int
    num_tokens: int | None = None
    causal: bool = False
    out_proj: bool = True
    heads: int = 1
    shared_over_channels: bool = False


def is_mixer(module: object) -> bool:
    """Whether ``module`` is a token mixer (built by ``build_mixer`` or a ``TokenMixer``): it keeps its requests."""
    return isinstance(module, nn.Module) and isinstance(getattr(module, "request", None), MixerRequest)
