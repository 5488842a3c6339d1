"""What every token mixer takes and returns (the ``model`` config group builds one per layer).

A network asks for a mixer with the same keyword arguments whatever the mixer, and each mixer
ignores those it has no use for: ``dim`` (token width), ``num_tokens`` (sequence length, when fixed),
``causal`` (token i must not see later tokens), ``out_proj`` (an output projection), ``heads``
(overrides the mixer's own ``model.heads``) and ``shared_over_channels`` (weights that do not grow
with width x length). A mixer that cannot honour a request raises :class:`~attnexp.errors.AttnexpError`
with the reason. Every mixer is called as ``forward(x, context=None, mask=None, need_weights=False)``
and returns ``(output, weights or None)``; masks are boolean, ``True`` meaning "may attend", and inputs
that do not fit together are refused (:func:`check_inputs`), never broadcast into wrong numbers.

What a mixer says about itself, read by the telemetry, the figures, the HParams record and the conformance kit
(``attnexp-check``): ``request`` (the requests it received), ``heads`` (how many heads it computes; none without
the attribute), ``weight_kind`` (what its weights are: :data:`WEIGHT_KINDS`, read by :func:`weight_kind`) and
``permutation_equivariant`` (permuting the tokens of a non-causal self-attention permutes its output alike: no
positions inside the mixer) and ``causal_only`` (it attends causally only: :func:`make_mixer` refuses to build it
non-causal, and the conformance kit checks it under causal masks). A mixer built outside this package need not
subclass :class:`TokenMixer`: the networks build every mixer through :func:`build_mixer`, which records the requests
on it and refuses an output that is not shaped as its input (:class:`~attnexp.errors.MixerError`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from attnexp.errors import AttnexpError, MixerError
from attnexp.mixers.frames import shown
from attnexp.mixers.request import MixerRequest

# What a mixer's weights are (its ``weight_kind``):
DISTRIBUTIONS = "distributions"  # each row sums to 1 over the keys it may see, no weight below 0 (softmax)
NON_NEGATIVE = "non-negative"  # no weight below 0, rows of any sum (sigmoid, ReLU attention)
SIGNED = "signed"  # weights of either sign (a difference of two maps)
WEIGHT_KINDS = (DISTRIBUTIONS, NON_NEGATIVE, SIGNED)


class TokenMixer(nn.Module):
    """Base of every token mixer: takes the requests of the contract above and keeps them as ``request``.
    A mixer adds its own options as keyword arguments and passes the rest on."""

    weight_kind = NON_NEGATIVE  # softmax attention says DISTRIBUTIONS, a difference of maps SIGNED
    permutation_equivariant = False  # True: a non-causal self-attention commutes with permuting its tokens
    causal_only = False  # True: defined for causal attention only (stick-breaking, forget gates): never non-causal

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
    """The mixer ``factory`` (the ``model`` config, a partial) builds for a network's ``request`` (:func:`make_mixer`),
    its output checked at every call: a mixer that returns another shape than it was given stops there with a
    :class:`~attnexp.errors.MixerError` that names it and both shapes."""
    mixer = make_mixer(factory, **request)
    mixer.register_forward_hook(refuse_misshapen_output, with_kwargs=True)
    return mixer


def make_mixer(factory: Callable[..., nn.Module], **request: Any) -> nn.Module:
    """The mixer ``factory`` builds for ``request``, unguarded (the conformance kit measures what it returns). A mixer
    of another package that does not keep its requests gets them as ``request`` (its own ``model`` options included),
    so the telemetry and the HParams record find and describe it as they do a built-in one; a ``weight_kind`` that is
    none of :data:`WEIGHT_KINDS` is refused here, before any training, and so is a mixer that declares ``causal_only``
    asked to be built non-causal."""
    asked = {**getattr(factory, "keywords", {}), **request}
    if declares_causal_only(factory) and not asked.get("causal"):
        raise not_causal(getattr(getattr(factory, "func", factory), "__name__", str(factory)))
    mixer = factory(**request)
    if not isinstance(getattr(mixer, "request", None), MixerRequest):
        kept = MixerRequest(**{k: asked[k] for k in MixerRequest._fields if k in asked})
        mixer.request = kept  # type: ignore[assignment]
    weight_kind(mixer)
    return mixer


def declares_causal_only(factory: object) -> bool:
    """Whether the mixer a factory (a class, or a partial of one) builds, or a mixer, says ``causal_only = True``."""
    return bool(getattr(getattr(factory, "func", factory), "causal_only", False))


def not_causal(name: str) -> AttnexpError:
    """The refusal of a causal-only mixer asked to be built non-causal (bad input: the network or model.causal)."""
    return AttnexpError(
        f"{name} attends causally only (it declares causal_only = True): it cannot be built non-causal. A network "
        "asks for that as a bidirectional encoder, as cross-attention, or with model.causal=false where it leaves "
        "causality to the mixer: train it in the language model (data=corpus, data=text, data=mqar: every mixer "
        "causal), or set model.causal=true."
    )


def weight_kind(mixer: nn.Module) -> str:
    """What ``mixer``'s weights are, one of :data:`WEIGHT_KINDS`: its ``weight_kind``, or the older flag
    ``distributions`` (True: distributions, False: non-negative), whichever the mixer or the nearest class that sets
    either says; non-negative when none says anything."""
    kind = NON_NEGATIVE
    for names in (vars(mixer), *(vars(c) for c in type(mixer).__mro__)):
        if "weight_kind" in names:
            kind = names["weight_kind"]
            break
        if "distributions" in names:
            kind = DISTRIBUTIONS if names["distributions"] else NON_NEGATIVE
            break
    if kind not in WEIGHT_KINDS:
        raise AttnexpError(
            f"{type(mixer).__name__}.weight_kind = {kind!r} is not a kind of weights. Allowed: "
            f"{', '.join(map(repr, WEIGHT_KINDS))} (rows that sum to 1; no weight below 0; either sign)."
        )
    return kind


def where_defined(mixer: nn.Module, method: str | None = "forward") -> str:
    """``Class.method (file:line)`` of a mixer's method (``Class (file:line)`` for None: its class), for messages that
    point at the mixer's code."""
    target = type(mixer) if method is None else getattr(type(mixer), method, None)
    name = type(mixer).__name__ + ("" if method is None else f".{method}")
    try:
        source, line = inspect.getsourcefile(target), inspect.getsourcelines(target)[1]  # type: ignore[arg-type]
    except (TypeError, OSError):
        source = None
    if source is None:
        return name
    return f"{name} ({shown(Path(source))}:{line})"


def refuse_misshapen_output(mixer: nn.Module, args: tuple, kwargs: dict, result: Any) -> None:
    """A forward hook on every mixer :func:`build_mixer` builds: the output must be (out, weights) with ``out`` shaped
    as the tokens it was given, (B, Lq, C), so that a mixer that drops a token or returns another layout stops at
    its own call, named, instead of failing later in the network or training on wrong numbers."""
    x = args[0] if args else kwargs.get("x")
    if not isinstance(x, Tensor):
        return
    out = result[0] if isinstance(result, tuple) and len(result) == 2 else None
    if not isinstance(out, Tensor):
        raise MixerError(
            f"{where_defined(mixer)} returned {type(result).__name__}: a mixer returns a pair (output, "
            "weights or None)."
        )
    if out.shape != x.shape:
        from attnexp.mixers.tracing import computed_at

        computed = computed_at(mixer, lambda: mixer.forward(*args, **kwargs)[0])
        raise MixerError(
            f"{where_defined(mixer)} returned an output of shape {tuple(out.shape)}{computed} for tokens of shape "
            f"{tuple(x.shape)}: a mixer returns (batch, tokens, width) = {tuple(x.shape)}, the shape of "
            "the tokens it mixes."
        )


def expect_shape(
    mixer: nn.Module,
    method: str,
    what: str,
    value: Any,
    shape: tuple[int, ...],
    names: str,
    rerun: Callable[[], Any] | None = None,
) -> None:
    """Stop with a :class:`~attnexp.errors.MixerError` that names ``mixer``'s ``method`` (file:line) when what it
    returned, ``what``, is not a tensor of ``shape`` (its axes called ``names``, e.g. ``(B, H, Lq, Lk)``): a broken
    shape is reported at the user's method and at the line that computed it (``rerun``: the call again), not as a
    reshape error inside attnexp."""
    got = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
    if got != tuple(shape):
        from attnexp.mixers.tracing import computed_at

        raise MixerError(
            f"{where_defined(mixer, method)} returned {what} of shape {got}{computed_at(mixer, rerun)}: expected "
            f"{names} = {tuple(shape)}."
        )


def check_inputs(x: Tensor, context: Tensor, mask: Tensor | None, heads: int = 1) -> None:
    """Refuse inputs that would broadcast into wrong numbers: a context of another batch, a mask that is not
    boolean or does not broadcast to (B, H, Lq, Lk). (A width other than the projections' is refused by them.)"""
    if x.dim() != 3 or context.dim() != 3:
        raise ValueError(
            f"a mixer takes x (batch, tokens, width) and a context (batch, tokens, width); got x "
            f"{tuple(x.shape)} and context {tuple(context.shape)}."
        )
    if context.shape[0] != x.shape[0]:
        raise ValueError(
            f"the context's batch ({context.shape[0]}) differs from the queries' ({x.shape[0]}): each "
            "query sequence attends to its own context sequence."
        )
    if mask is None:
        return
    full = (x.shape[0], heads, x.shape[1], context.shape[1])
    if mask.dtype != torch.bool or mask.dim() > 4 or any(m not in (1, f) for m, f in zip(mask.shape[::-1], full[::-1])):
        raise ValueError(
            f"the attention mask must be boolean (True = may attend) and broadcast to (batch, heads, "
            f"queries, keys) = {full}; got {mask.dtype} {tuple(mask.shape)}."
        )
