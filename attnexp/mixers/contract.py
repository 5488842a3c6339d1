"""What every token mixer takes and returns (the ``model`` config group builds one per layer).

A network asks for a mixer with the same keyword arguments whatever the mixer, and each mixer
ignores those it has no use for: ``dim`` (token width), ``num_tokens`` (sequence length, when fixed),
``causal`` (token i must not see later tokens), ``out_proj`` (an output projection), ``heads``
(overrides the mixer's own ``model.heads``) and ``shared_over_channels`` (weights that do not grow
with width x length). A mixer that cannot honour a request raises :class:`~attnexp.errors.AttnexpError`
with the reason. Every mixer is called as ``forward(x, context=None, mask=None, need_weights=False)``
and returns ``(output, weights or None)``; masks are boolean, ``True`` meaning "may attend".
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor, nn


class MixerRequest(NamedTuple):
    """The network's requests, as a mixer received them."""

    dim: int
    num_tokens: int | None
    causal: bool
    out_proj: bool
    heads: int
    shared_over_channels: bool


class TokenMixer(nn.Module):
    """Base of every token mixer: takes the requests of the contract above and keeps them as ``request``.
    A mixer adds its own options as keyword arguments and passes the rest on."""

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
