"""What a mixer declares about itself, held to what it does in a run: its weights on the first training batch against
its ``weight_kind`` (the conformance kit's rule, :func:`~attnexp.mixers.conformance.weights.weight_problems`), and
what the attention telemetry cannot measure of it. The telemetry callback calls these; they read the mixer's
public contract only."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

import torch
from torch import Tensor, nn

from attnexp.errors import MixerError
from attnexp.mixers.conformance.kit import TOL
from attnexp.mixers.conformance.weights import weight_problems
from attnexp.mixers.contract import weight_kind, where_defined
from attnexp.mixers.multihead import MultiHeadAttention
from attnexp.mixers.request import MixerRequest, is_mixer
from attnexp.mixers.tracing import computed_at

T = TypeVar("T")
LOW_PRECISION_TOL = 1e-2  # a row sum's rounding when the weights were computed in bf16 or fp16


def check_declared_weights(
    mixer: nn.Module,
    weights: Tensor | None,
    mask: Tensor | None,
    low_precision: bool,
    rerun: Callable[[], Tensor | None] | None = None,
) -> None:
    """Stop a run whose mixer returned ``weights`` (B, H, Lq, Lk) that break its ``weight_kind`` (negative weights
    not declared signed, rows of softmax-like weights that do not sum to 1, weight on masked pairs, NaN), with the
    kit's explanation and the line of the mixer's code that computed them (``rerun``: the call that returned them,
    again): its telemetry and figures would describe them as what they are not. ``mask``: the one the mixer's call
    was given; the causal mask is added when the mixer was built causal."""
    if weights is None or weights.dim() != 4:
        return
    lq, lk = weights.shape[-2:]
    allowed = torch.ones(lq, lk, dtype=torch.bool, device=weights.device)
    if getattr(getattr(mixer, "request", None), "causal", False):
        allowed = allowed.tril()
    if mask is not None:
        allowed = allowed & mask.to(weights.device)
    kind = weight_kind(mixer)
    problems, measured = weight_problems(weights, allowed, kind, LOW_PRECISION_TOL if low_precision else TOL)
    if not torch.isfinite(weights).all():  # a NaN is no kind: no declaration fixes it
        made = computed_at(mixer, rerun, nonfinite=True).replace("its first NaN or infinity made at", "first made at")
        raise MixerError(
            f"{where_defined(mixer, None)} made NaN or infinite weights on the first training batch "
            f"({int((~torch.isfinite(weights)).sum())} of them){made}: a NaN made from finite inputs is the mixer's "
            "own arithmetic, whatever kind its weights are; attnexp-check with this model= and data= names it too."
        )
    if problems:
        computed = computed_at(mixer, rerun, numbers=True)
        raise MixerError(
            f"{where_defined(mixer, None)} says its weights are {kind!r} (weight_kind), but on the first training "
            f"batch they hold {'; '.join(problems)} ({measured}){computed}. Its telemetry and figures would describe "
            "them as what they are not: declare the kind they are (distributions, non-negative or signed), or fix the "
            "weights; attnexp-check with this model= finds the same on random inputs."
        )


def scores_unmeasured(mixer: nn.Module) -> str:
    """What the telemetry could not measure of a layer whose weights came without scores, and why."""
    how = (
        "its attend does not pass them through self.hook_scores"
        if isinstance(mixer, MultiHeadAttention)
        else "it offers no hook_scores module"
    )
    return f"{type(mixer).__name__}: score_min, score_max and nonfinite (its scores; {how})"


def built_causal(net: nn.Module) -> bool | list[bool] | None:
    """Whether ``net``'s mixers were built causal, as the network asked or the mixer's own setting said: one answer
    when every mixer agrees, else one per mixer in module order (an encoder-decoder's decoder); None without
    mixers. What a run records (``causal``), whatever ``model.causal`` the config held."""
    return per_mixer(net, lambda m: bool(cast(MixerRequest, m.request).causal))


def weight_kinds(net: nn.Module) -> str | list[str] | None:
    """What ``net``'s mixers say their weights are (``weight_kind``): one kind when every mixer says the same, else
    one per mixer in module order; None without mixers. What a run records (``weight_kind``)."""
    return per_mixer(net, weight_kind)


def per_mixer(net: nn.Module, fact: Callable[[nn.Module], T]) -> T | list[T] | None:
    """``fact`` of each of ``net``'s mixers: one value when they agree, else a list in module order, None without."""
    found = [fact(m) for m in net.modules() if is_mixer(m)]
    if not found:
        return None
    return found[0] if len(set(found)) == 1 else found
