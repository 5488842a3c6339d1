"""What every token mixer takes and returns (the ``model`` config group builds one per layer).

A network asks for a mixer with the same keyword arguments whatever the mixer, and each mixer
ignores those it has no use for: ``dim`` (token width), ``num_tokens`` (sequence length, when fixed),
``causal`` (token i must not see later tokens), ``out_proj`` (an output projection), ``heads``
(overrides the mixer's own ``model.heads``) and ``shared_over_channels`` (weights that do not grow
with width x length). A mixer that cannot honour a request raises :class:`~attnexp.errors.AttnexpError`
with the reason. Every mixer is called as ``forward(x, context=None, mask=None, need_weights=False)``
and returns ``(output, weights or None)``; masks are boolean, ``True`` meaning "may attend", and inputs
that do not fit together are refused (:func:`check_inputs`), never broadcast into wrong numbers.

What a mixer says about itself, read by the telemetry, the HParams record and the conformance kit
(``attnexp-check``): ``request`` (the requests it received), ``heads`` (how many heads it computes; none
without the attribute) and ``distributions`` (True: each row of its weights sums to 1, as softmax's do;
False or absent: the weights make no such promise, as sigmoid's). A mixer built outside this package
need not subclass :class:`TokenMixer`: the networks build every mixer through :func:`build_mixer`, which
records the requests on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn


class MixerRequest(NamedTuple):
    """The network's requests, as a mixer received them."""

    dim: int
    num_tokens: int | None = None
    causal: bool = False
    out_proj: bool = True
    heads: int = 1
    shared_over_channels: bool = False


class TokenMixer(nn.Module):
    """Base of every token mixer: takes the requests of the contract above and keeps them as ``request``.
    A mixer adds its own options as keyword arguments and passes the rest on."""

    distributions = False  # no promise about the weights' rows; softmax attention says True

    def __init__(
        self,
        dim: int,
        *,
        num_tokens: int | None = None,
        causal: bool = False,
        out_proj: bool = True,
        heads: int = 1,
        shared_over_channels: bool = False,
    ) -> None:
        super().__init__()
        self.request = MixerRequest(dim, num_tokens, causal, out_proj, heads, shared_over_channels)

    def forward(
        self, x: Tensor, context: Tensor | None = None, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Mix ``x`` (B, Lq, C), attending to ``context`` (B, Lk, C; default ``x``); return (out, weights)."""
        raise NotImplementedError


def build_mixer(factory: Callable[..., nn.Module], **request: Any) -> nn.Module:
    """The mixer ``factory`` (the ``model`` config, a partial) builds for a network's ``request``. A mixer of another
    package that does not keep its requests gets them as ``request`` (its own ``model`` options included), so the
    telemetry and the HParams record find and describe it as they do a built-in one."""
    mixer = factory(**request)
    if not isinstance(getattr(mixer, "request", None), MixerRequest):
        asked = {**getattr(factory, "keywords", {}), **request}
        mixer.request = MixerRequest(**{k: asked[k] for k in MixerRequest._fields if k in asked})
    return mixer


def is_mixer(module: nn.Module) -> bool:
    """Whether ``module`` is a token mixer (built by :func:`build_mixer` or a :class:`TokenMixer`)."""
    return isinstance(getattr(module, "request", None), MixerRequest)


def check_inputs(x: Tensor, context: Tensor, mask: Tensor | None, heads: int = 1) -> None:
    """Refuse inputs that would broadcast into wrong numbers: a context of another batch, a mask that is not
    boolean or does not broadcast to (B, H, Lq, Lk). (A width other than the projections' is refused by them.)"""
    if x.dim() != 3 or context.dim() != 3:
        raise ValueError(f"a mixer takes x (batch, tokens, width) and a context (batch, tokens, width); got x "
                         f"{tuple(x.shape)} and context {tuple(context.shape)}.")
    if context.shape[0] != x.shape[0]:
        raise ValueError(f"the context's batch ({context.shape[0]}) differs from the queries' ({x.shape[0]}): each "
                         "query sequence attends to its own context sequence.")
    if mask is None:
        return
    full = (x.shape[0], heads, x.shape[1], context.shape[1])
    if mask.dtype != torch.bool or mask.dim() > 4 or any(m not in (1, f) for m, f in zip(mask.shape[::-1], full[::-1])):
        raise ValueError(f"the attention mask must be boolean (True = may attend) and broadcast to (batch, heads, "
                         f"queries, keys) = {full}; got {mask.dtype} {tuple(mask.shape)}.")
