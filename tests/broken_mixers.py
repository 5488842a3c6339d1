"""Mixers with one deliberate defect each, for the conformance kit's tests (and a user folder's in the CLI tests):
the kit must fail each on the check that names its defect; and unusual but correct ones (``AttendOnly``,
``NoWeights``, ``CausalOnly``) that every part of a run must take as they are."""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers import DotAttention, MultiHeadAttention, SigmoidAttention
from attnexp.mixers.multihead import zero_empty_rows


class LeaksTheFuture(DotAttention):
    """Accepts ``causal=True`` and then forgets it: every token sees the later ones."""

    def __init__(self, dim: int, **options) -> None:
        super().__init__(dim, **options)
        self.causal = False


class IgnoresPadding(DotAttention):
    """Drops the mask it is given: padded keys get weight."""

    def forward(self, x, context=None, mask=None, need_weights=False):
        return super().forward(x, context, None, need_weights)


class NaiveSoftmax(nn.Module):
    """A one-head softmax attention written from scratch, outside the package's base classes: masked scores at -inf
    and a plain softmax, so a query that sees no key gets NaN (0/0); nor does it check its inputs."""

    distributions = True

    def __init__(
        self, dim: int, *, num_tokens=None, causal=False, out_proj=True, heads=1, shared_over_channels=False
    ) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim) if out_proj else nn.Identity()
        self.causal, self.heads = causal, 1

    def forward(self, x: Tensor, context: Tensor | None = None, mask: Tensor | None = None, need_weights: bool = False):
        context = x if context is None else context
        scores = self.q(x) @ self.k(context).transpose(-2, -1) / x.shape[-1] ** 0.5  # (B, Lq, Lk)
        if self.causal:
            scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
        if mask is not None:
            scores = scores.masked_fill(~mask[:, 0], float("-inf"))
        weights = scores.softmax(-1)
        return self.out(weights @ self.v(context)), weights[:, None] if need_weights else None


class SigmoidCalledSoftmax(DotAttention):
    """Sigmoid weights that claim to be distributions."""

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        return torch.sigmoid(scores)


class DeadParameter(DotAttention):
    """Holds a parameter its output never uses: it would count in the parameters of a comparison and learn nothing."""

    def __init__(self, dim: int, **options) -> None:
        super().__init__(dim, **options)
        self.unused = nn.Parameter(torch.ones(dim))


class FusedDisagrees(DotAttention):
    """A fused path that computes something else than its explicit formula (a temperature of 2)."""

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str) -> Tensor:
        mask = None if mask is None else self.full_mask(mask, q, k)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=self.causal and mask is None, scale=0.5 * self.head_dim**-0.5
        )


class ExplicitPathDetached(DotAttention):
    """The explicit formula's output is cut from the graph: its input gets no gradient where the fused path's does."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool):
        out, weights = super().attend(q, k, v, mask, need_weights)
        return (out.detach() if self.path_for(q.device, need_weights) == "explicit" else out), weights


class MixesTheBatch(DotAttention):
    """Adds the batch's mean to every sample: a sample's output depends on the others in its batch."""

    def forward(self, x, context=None, mask=None, need_weights=False):
        out, weights = super().forward(x, context, mask, need_weights)
        return out + out.mean(0, keepdim=True), weights


class DropsALastToken(DotAttention):
    """Returns one token fewer than it was given."""

    def forward(self, x, context=None, mask=None, need_weights=False):
        out, weights = super().forward(x, context, mask, need_weights)
        return out[:, :-1], weights


class UnseededNoise(DotAttention):
    """Adds noise from a generator of its own, seeded by the clock: the same seed gives other numbers."""

    def forward(self, x, context=None, mask=None, need_weights=False):
        out, weights = super().forward(x, context, mask, need_weights)
        generator = torch.Generator().manual_seed(time.perf_counter_ns())
        return out + 1e-3 * torch.randn(out.shape, generator=generator), weights


class UnsafeExp(DotAttention):
    """exp() of the scores without taking each row's largest off first: overflows in bf16 for large scores."""

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return 1e3 * super().score(q, k)

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        e = scores.to(torch.bfloat16).exp()
        return (e / e.sum(-1, keepdim=True)).float()


class IgnoresHeads(DotAttention):
    """Accepts ``heads=2`` and computes with one head."""

    def __init__(self, dim: int, **options) -> None:
        options["heads"] = 1
        super().__init__(dim, **options)
        self.heads = 2


class Transposes(DotAttention):
    """Returns its output as (B, C, L): a shape error where the width and the length differ, numbers in the wrong
    layout where they are equal."""

    def forward(self, x, context=None, mask=None, need_weights=False):
        out, weights = super().forward(x, context, mask, need_weights)
        return out.transpose(1, 2), weights


class NaNWeights(SigmoidAttention):
    """Weights that are non-negative as declared, but NaN where a query's first key is: returned, not used."""

    def forward(self, x, context=None, mask=None, need_weights=False):
        out, weights = super().forward(x, context, mask, need_weights)
        return out, None if weights is None else weights.index_fill(-1, torch.tensor([0]), float("nan"))


class NegativeCalledNonNegative(DotAttention):
    """A difference of two maps that does not say its weights are signed."""

    weight_kind = "non-negative"

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        return scores.softmax(-1) - 0.5 * (0.5 * scores).softmax(-1)


class FailsInTraining(DotAttention):
    """Correct in eval mode (every check of the kit runs there), raises in training mode: only a run finds it."""

    def forward(self, x, context=None, mask=None, need_weights=False):
        if self.training:
            raise RuntimeError("this mixer cannot train")
        return super().forward(x, context, mask, need_weights)


class NoWeights(DotAttention):
    """Correct, but never returns its weights, even when asked."""

    def forward(self, x, context=None, mask=None, need_weights=False):
        return super().forward(x, context, mask, False)


class AttendOnly(MultiHeadAttention):
    """Correct: softmax attention written as its own ``attend``, with no ``score`` (the contract's other way in)."""

    def attend(self, q, k, v, mask, need_weights):
        scores, mask = (
            (q @ k.transpose(-2, -1)).float() * self.head_dim**-0.5,
            self.full_mask(mask, q, k),
        )  # (B, H, Lq, Lk)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = zero_empty_rows(scores.softmax(-1), mask).to(v.dtype)
        return weights @ v, weights if need_weights else None


class CausalOnly(DotAttention):
    """Correct: dot attention that may only be causal, as the docs say to declare it; it refuses to be built
    non-causal itself too, as a mixer written before the declaration did (no ``causal: true`` in its config)."""

    causal_only = True
    permutation_equivariant = False

    def __init__(self, dim: int, *, causal: bool = False, **options) -> None:
        if not causal:
            raise AttnexpError("CausalOnly attends causally only: it cannot be built non-causal.")
        super().__init__(dim, causal=causal, **options)


class SoftpickCountsPadding(DotAttention):
    """Softpick, relu(exp(s) - 1) / sum |exp(s) - 1|, whose denominator counts every hidden key (exp(-inf) - 1 = -1):
    what hidden keys hold changes nothing, how many there are does."""

    weight_kind = "non-negative"
    fused_paths = ()

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        shifted = torch.expm1(scores)
        return F.relu(shifted) / shifted.abs().sum(-1, keepdim=True).clamp_min(1e-6)


class DropsMaskWhenCausal(DotAttention):
    """Honours the padding mask unless it is causal: only a padding check under a causal mask can see it."""

    def forward(self, x, context=None, mask=None, need_weights=False):
        return super().forward(x, context, None if self.causal else mask, need_weights)


class AttendDropsAToken(MultiHeadAttention):
    """Its own attend returns one query row fewer than it was given."""

    def attend(self, q, k, v, mask, need_weights):
        weights = (q @ k.transpose(-2, -1)).softmax(-1)
        return (weights @ v)[:, :, :-1], None


class ScoreDropsAKey(DotAttention):
    """Scores one key fewer than there are."""

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return super().score(q, k)[..., :-1]


class NormaliseDropsAKey(DotAttention):
    """Its normaliser returns weights for one key fewer than it was given scores for."""

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        return scores[..., :-1].softmax(-1)


class BuiltWithABug(DotAttention):
    """A ValueError of its own constructor's code: a bug, not a value the user typed."""

    def __init__(self, dim: int, **options) -> None:
        super().__init__(dim, **options)
        self.width = int("sixteen")


class OldFlagSigned(DotAttention):
    """A difference of two maps (rows summing to 0) that says, with the older flag, that its weights are
    non-negative."""

    distributions = False
    fused_paths = ()

    def normalise(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        flipped = torch.where(torch.isinf(scores), scores, -scores)  # masked keys stay at -inf
        return scores.softmax(-1) - flipped.softmax(-1)


class WindowLetsTheNextKeyIn(MultiHeadAttention):
    """A causal window whose mask lets each query see the next key too: weight on a masked pair, computed where the
    mask is applied, returned through a cast."""

    def attend(self, q, k, v, mask, need_weights):
        lq, lk = q.shape[-2], k.shape[-2]
        seen = torch.ones(lq, lk, dtype=torch.bool).tril(1)  # tril(0) meant: the next key is let in
        scores = (q @ k.transpose(-2, -1)) * self.head_dim**-0.5
        weights = scores.masked_fill(~seen, float("-inf")).softmax(-1)
        return weights.to(v.dtype) @ v, weights.to(v.dtype) if need_weights else None


class IgnoresPaddingNoWeights(DotAttention):
    """Drops the mask it is given and returns no weights: no telemetry sees the weight on padded keys."""

    def forward(self, x, context=None, mask=None, need_weights=False):
        return super().forward(x, context, None, False)
