"""The multi-head plumbing every attention mixer shares, and attention with masks: scores -> normaliser -> masking,
empty rows and dropout, written once (:func:`attention`).

A mixer subclasses :class:`MultiHeadAttention`, says how a query scores a key (:meth:`~MultiHeadAttention.score`,
the explicit path), may replace the softmax by another normaliser (:meth:`~MultiHeadAttention.normalise`, saying
what its weights are: ``weight_kind``) and may offer fused paths that give the same numbers faster
(:meth:`~MultiHeadAttention.fused`); a mechanism that is no score and normaliser overrides
:meth:`~MultiHeadAttention.attend` instead. A mechanism that needs the tokens themselves (a gate computed from each
token's input) overrides :meth:`~MultiHeadAttention.tokens`: what it returns reaches ``attend``, ``score`` and
``fused`` of the same call as their keyword ``tokens``. What each returns is held to its shape, so a broken one is
named with its file and line (:func:`~attnexp.mixers.contract.expect_shape`).
``model.path`` picks one: ``auto`` (the mixer's fastest that applies), ``explicit`` (the formula through
autograd: what the weights figures and telemetry use), or a fused path by name. Masks are boolean and broadcast
to ``(B, H, Lq, Lk)``: ``True`` means "may attend". The constructor arguments are the mixer contract's
(:mod:`attnexp.mixers.contract`) plus ``dropout``, ``bias`` and ``path``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnexp.errors import AttnexpError, divisors
from attnexp.mixers.contract import DISTRIBUTIONS, TokenMixer, check_inputs, expect_shape
from attnexp.rules import check

EXPLICIT = "explicit"


def causal_mask(queries: int, keys: int | None = None, device: torch.device | None = None) -> Tensor:
    """Lower-triangular boolean mask: query i sees keys <= i.  # (Lq, Lk)"""
    keys = queries if keys is None else keys
    return torch.ones(queries, keys, dtype=torch.bool, device=device).tril()


def zero_empty_rows(t: Tensor, mask: Tensor | None) -> Tensor:
    """Zeros for queries whose keys are all masked (e.g. padding), so they give 0, not NaN.  # (B, H, Lq, *)"""
    return t if mask is None else t.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)


def softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """The default normaliser: each row of weights a distribution over the keys it may see.  # (B, H, Lq, Lk)"""
    return scores.softmax(dim=-1)


Normaliser = Callable[[Tensor, Tensor | None], Tensor]


def attention_weights(scores: Tensor, mask: Tensor | None, normalise: Normaliser = softmax) -> Tensor:
    """The weights of ``scores``: masked scores become -inf, the normaliser (softmax unless the mixer has its own, e.g.
    sigmoid) turns them into weights, and a fully masked row gets zero weights (0, not NaN).  # (B, H, Lq, Lk)"""
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return zero_empty_rows(normalise(scores, mask), mask)


def attention(
    scores: Tensor, v: Tensor, mask: Tensor | None, dropout: float = 0.0, normalise: Normaliser = softmax
) -> tuple[Tensor, Tensor]:
    """normalise(scores) @ v with masked positions at exactly zero weight; returns (out, weights).

    The steps every attention mixer shares, written once: :func:`attention_weights`, then dropout and ``@ v``.
    Scores come in float32 (float64 in a float64 module) so large logits (euclid's 1/eps) never overflow under mixed
    precision; the weights meet ``v`` in its dtype.
    # scores (B, H, Lq, Lk), v (B, H, Lk, D)
    """
    weights = attention_weights(scores, mask, normalise).to(v.dtype)
    return F.dropout(weights, dropout, training=dropout > 0) @ v, weights  # (B, H, Lq, D)


class MultiHeadAttention(TokenMixer):
    """q/k/v projections, head split and merge, the causal mask, the output projection, and the path switch.

    ``context`` (keys and values) defaults to ``x``, so the same module does cross-attention.
    A subclass names its fused paths in ``fused_paths`` (the first is ``auto``'s choice unless
    :meth:`auto_path` says otherwise) and computes them in :meth:`fused`; ``fused_dropout`` says whether
    they apply attention dropout (else training with dropout runs the explicit path). The weights come from
    :meth:`normalise` (softmax unless the subclass says otherwise). The explicit path passes its scores through
    ``hook_scores``, a pass-through module: a forward hook on it reads them (the telemetry does).
    """

    fused_paths: tuple[str, ...] = ()
    fused_dropout = True
    weight_kind = (
        DISTRIBUTIONS  # softmax: each row sums to 1 (0 when fully masked); another normaliser says what its are
    )
    permutation_equivariant = True  # no positions inside: a mixer that adds some says False

    def __init__(
        self, dim: int, *, dropout: float = 0.0, bias: bool = True, path: str = "auto", **request: Any
    ) -> None:
        super().__init__(dim, **request)
        heads, causal, out_proj = self.request.heads, self.request.causal, self.request.out_proj
        check("model", heads=heads, dropout=dropout)
        if heads > dim:
            raise AttnexpError(
                f"heads must be between 1 and dim={dim}, got heads={heads}. Pick heads from {divisors(dim)}."
            )
        if dim % heads:
            raise AttnexpError(
                f"dim={dim} is not divisible by heads={heads}: each head needs dim/heads channels. "
                f"Pick model.heads from {divisors(dim)}, or change the width."
            )
        allowed = ("auto", EXPLICIT, *self.fused_paths)
        if path not in allowed:
            raise AttnexpError(
                f"model.path={path!r} is not a path of this mixer. Allowed: {', '.join(allowed)} "
                "(auto: the fastest that applies; explicit: the formula through autograd)."
            )
        if path in self.fused_paths and dropout > 0 and not self.fused_dropout:
            raise AttnexpError(
                f"model.path={path} has no attention dropout, and model.dropout={dropout}. Use "
                "model.path=auto (the explicit formula while dropout is on) or model.dropout=0."
            )
        self.dim, self.heads, self.head_dim = dim, heads, dim // heads
        self.dropout, self.causal, self.path = dropout, causal, path
        self.q_proj = nn.Linear(dim, dim, bias=bias)
        self.k_proj = nn.Linear(dim, dim, bias=bias)
        self.v_proj = nn.Linear(dim, dim, bias=bias)
        self.out_proj = nn.Linear(dim, dim, bias=bias) if out_proj else nn.Identity()
        self.hook_scores = nn.Identity()  # the explicit path's scores pass through it: hook it to read them

    def forward(
        self, x: Tensor, context: Tensor | None = None, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``x`` (B, Lq, C) to ``context`` (B, Lk, C); return (out, weights (B, H, Lq, Lk) or None)."""
        context = x if context is None else context
        check_inputs(x, context, mask, self.heads)
        gates = self.tokens(x, context)
        passed = {} if gates is None else {"tokens": gates}  # only to a mixer whose tokens() gives something
        q, k, v = (self._split(p(t)) for p, t in ((self.q_proj, x), (self.k_proj, context), (self.v_proj, context)))
        out, weights = self.attend(q, k, v, mask, need_weights, **passed)  # (B, H, Lq, D)
        b, lq, lk = x.shape[0], x.shape[1], context.shape[1]

        def again(part: int) -> Callable[[], Any]:  # the call once more, for the line that computed a wrong shape
            return lambda: self.attend(q, k, v, mask, need_weights, **passed)[part]

        expect_shape(self, "attend", "an output", out, (b, self.heads, lq, self.head_dim), "(B, H, Lq, D)", again(0))
        if weights is not None:
            expect_shape(self, "attend", "weights", weights, (b, self.heads, lq, lk), "(B, H, Lq, Lk)", again(1))
        out = out.transpose(1, 2).reshape(b, lq, self.dim)  # (B, Lq, C)
        return self.out_proj(out), weights

    def tokens(self, x: Tensor, context: Tensor) -> Any:
        """The hook for a mechanism that needs the tokens themselves, before the projections: ``x`` (B, Lq, C) and
        ``context`` (B, Lk, C; ``x`` in self-attention). What it returns (a forget gate per token and head, say) is
        passed on to this call's :meth:`attend`, and from there to :meth:`score` and :meth:`fused`, as their keyword
        ``tokens``; nothing is kept between calls. None here: the other methods are called as they are written."""
        return None

    def _split(self, t: Tensor) -> Tensor:
        b, length, _ = t.shape
        return t.view(b, length, self.heads, self.head_dim).transpose(1, 2)  # (B, H, L, D)

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        """Attention logits before masking and the normaliser (a mixer whose :meth:`tokens` gives something takes it
        as the keyword ``tokens``). ``q`` and ``k`` come in float32 whatever the autocast or module precision, float64
        in a float64 module.  # (B, H, Lq, Lk)"""
        raise NotImplementedError

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        """Weights from the scores, masked ones at -inf; ``mask`` is the full mask (causal included) or None. Softmax
        here; a mixer with another normaliser overrides it and says what its weights are (``weight_kind``).  # (B,
        H, Lq, Lk)"""
        return softmax(scores, mask)

    def full_mask(self, mask: Tensor | None, q: Tensor, k: Tensor) -> Tensor | None:
        """The caller's mask, combined with the causal mask if the layer is causal."""
        if not self.causal:
            return mask
        tri = causal_mask(q.shape[-2], k.shape[-2], q.device)
        return tri if mask is None else mask & tri

    def sdpa(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float | None = None) -> Tensor:
        """One ``F.scaled_dot_product_attention`` call with this layer's masks (the caller's ``mask`` combined with the
        causal one, or ``is_causal`` alone), its attention dropout while training and zeros for queries that may see
        no key; ``scale`` defaults to 1/sqrt(q's width). The fused path of every mixer that fuses through SDPA.
        # q (B, H, Lq, E), k (B, H, Lk, E), v (B, H, Lk, Dv) -> (B, H, Lq, Dv)"""
        mask = None if mask is None else self.full_mask(mask, q, k)
        dropout = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=self.causal and mask is None, scale=scale
        )
        return zero_empty_rows(out, mask)

    def auto_path(self, device: torch.device, head_dim: int) -> str:
        """The fused path ``auto`` runs on ``device``."""
        return self.fused_paths[0]

    def path_for(self, device: torch.device, need_weights: bool = False) -> str:
        """The path a call computes with: ``explicit`` when weights are asked for, when this mixer has no fused path,
        or while dropout is on and its fused paths have none; else ``model.path`` (``auto``: :meth:`auto_path`)."""
        dropping = self.training and self.dropout > 0 and not self.fused_dropout
        if need_weights or not self.fused_paths or self.path == EXPLICIT or dropping:
            return EXPLICIT
        return self.auto_path(device, self.head_dim) if self.path == "auto" else self.path

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool, **tokens: Any
    ) -> tuple[Tensor, Tensor | None]:
        """normalise(score) @ v on the path :meth:`path_for` picks; ``tokens``: what :meth:`tokens` gave, if anything,
        passed on to :meth:`score` or :meth:`fused`.  # (B, H, Lq, D)"""
        path = self.path_for(q.device, need_weights)
        if path != EXPLICIT:
            return self.fused(q, k, v, mask, path, **tokens), None
        dropout = self.dropout if self.training else 0.0
        q, k = (t.to(torch.promote_types(t.dtype, torch.float32)) for t in (q, k))  # float32, or float64 kept
        scores = self.score(q, k, **tokens)
        again = functools.partial(self.score, q, k, **tokens)
        expect_shape(self, "score", "scores", scores, (*q.shape[:-1], k.shape[-2]), "(B, H, Lq, Lk)", again)
        out, weights = attention(self.hook_scores(scores), v, self.full_mask(mask, q, k), dropout, self.normalised)
        return out, weights if need_weights else None

    def normalised(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        """:meth:`normalise`, its weights held to the scores' shape.  # (B, H, Lq, Lk)"""
        weights = self.normalise(scores, mask)
        again = functools.partial(self.normalise, scores, mask)
        expect_shape(self, "normalise", "weights", weights, tuple(scores.shape), "(B, H, Lq, Lk)", again)
        return weights

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str) -> Tensor:
        """The fused path ``path``: the explicit path's numbers up to rounding, without the weights. ``mask`` is the
        caller's; the causal mask is the mixer's to add (``tokens`` as for :meth:`score`).  # (B, H, Lq, D)"""
        raise NotImplementedError
