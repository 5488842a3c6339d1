"""Attention health, whatever the mixer: statistics of one layer's weights by their kind (:data:`WEIGHT_KINDS`), and
what a mixer's calls were given, read through its public contract only (what the telemetry callback logs)."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from attnexp.mixers.contract import DISTRIBUTIONS, SIGNED

PEAKED = 0.99  # a row whose largest weight passes this attends to (almost) one key


def attention_stats(
    weights: Tensor,
    scores: Tensor | None,
    causal: bool,
    mask: Tensor | None = None,
    self_attention: bool = True,
    kind: str = DISTRIBUTIONS,
) -> dict[str, float]:
    """Means over samples, heads and query rows of one layer's attention.  # weights, scores: (B, H, Lq, Lk)

    ``mask`` is the layer's (True = may attend, broadcast to (B, H, Lq, Lk); e.g. a key padding mask).
    Rows that may attend to one key only are left out, and in a self-attention with a mask the rows of
    tokens that are themselves masked (padding). ``max_weight``: the largest weight of a row; ``self_weight``:
    the weight a token puts on itself (self-attention only); ``score_min``, ``score_max``: the range of the finite
    scores before the normaliser over allowed pairs; ``nonfinite``: how many allowed scores are NaN or infinite;
    ``nonfinite_weights``: how many allowed weights are (every mixer that returns weights, scores or not).
    What else is measured depends on the ``kind`` of weights (:data:`~attnexp.mixers.WEIGHT_KINDS`), so that each
    number means something: distributions (softmax) get ``entropy``, row entropy / log(number of keys the row may
    attend to), and ``peaked``, the share of rows whose largest weight is over 0.99; non-negative weights (sigmoid)
    get ``mass`` instead, the mean sum of a row's weights (an entropy of weights that are no distribution means
    nothing); signed weights get ``mass``, ``negative_mass`` (the mean sum of a row's negative weights, as a
    positive number) and ``min_weight`` (the smallest weight of a row).
    """
    lq, lk = weights.shape[-2:]
    w = weights.float()
    allowed = torch.ones(lq, lk, dtype=torch.bool, device=w.device)
    if causal:
        allowed = allowed.tril()
    if mask is not None:
        allowed = (allowed & mask).expand(w.shape)  # (B, H, Lq, Lk)
    keys = allowed.sum(-1).float()  # (Lq,), or (B, H, Lq) with a mask
    rows = keys > 1  # a row with one key to see (the first one under a causal mask) says nothing
    if mask is not None and self_attention and lq == lk:
        rows = rows & allowed.any(-2)  # a token no query may attend to is padding: its own row says nothing either
    if not rows.any():
        return {}
    top = w.amax(-1)[..., rows]  # (B, H, rows), or (rows,) with a mask
    if kind == DISTRIBUTIONS:
        entropy = -(w * w.clamp_min(1e-30).log()).sum(-1)[..., rows]
        stats = {
            "entropy": (entropy / keys[rows].log()).mean().item(),
            "max_weight": top.mean().item(),
            "peaked": (top > PEAKED).float().mean().item(),
        }
    else:
        stats = {"mass": w.sum(-1)[..., rows].mean().item(), "max_weight": top.mean().item()}
    if kind == SIGNED:
        stats.update(
            negative_mass=(-w).clamp_min(0).sum(-1)[..., rows].mean().item(),
            min_weight=w.masked_fill(~allowed, math.inf).amin(-1)[..., rows].mean().item(),
        )
    stats["nonfinite_weights"] = float((~torch.isfinite(w) & allowed).sum())
    if self_attention and lq == lk:
        stats["self_weight"] = w.diagonal(dim1=-2, dim2=-1)[..., rows].mean().item()
    if scores is not None:
        s = scores.float()[..., allowed]  # (B, H, allowed pairs), or (allowed pairs,) with a mask
        finite = s[torch.isfinite(s)]
        stats.update(
            score_min=finite.min().item() if finite.numel() else math.nan,
            score_max=finite.max().item() if finite.numel() else math.nan,
            nonfinite=float((~torch.isfinite(s)).sum()),
        )
    return stats


def gate_stats(gates: Tensor) -> dict[str, float]:
    """Squeeze-excitation gates (B, C) or (B, L, C): ``gate_std``, their spread across inputs (std over the batch,
    averaged over channels): 0 for a gate that is the same for every input."""
    return {"gate_std": gates.float().std(0).mean().item() if len(gates) > 1 else math.nan}


class CallRecorder:
    """What a mixer's calls during one forward pass were given (``mask``, ``context``) and, where the mixer offers them
    through its ``hook_scores`` module (:class:`~attnexp.mixers.MultiHeadAttention`'s explicit path does), their
    scores. Only public calls: a forward pre-hook on the mixer and a forward hook on ``hook_scores``."""

    def __init__(self, mixer: nn.Module) -> None:
        self.call: dict[str, Any] = {}  # the keyword arguments of the last call (``mask``, ``context``)
        self.scores: Tensor | None = None
        self.hooks = [mixer.register_forward_pre_hook(self.keep_call, with_kwargs=True)]
        tap = getattr(mixer, "hook_scores", None)
        if isinstance(tap, nn.Module):
            self.hooks.append(tap.register_forward_hook(self.keep_scores))

    def keep_call(self, module: nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
        self.call = kwargs  # the last call's, as for the scores

    def keep_scores(self, module: nn.Module, args: Any, out: Tensor) -> None:
        self.scores = out  # the last call's (a decoder decodes first, then runs once more with weights)

    def close(self) -> None:
        for hook in self.hooks:
            hook.remove()
