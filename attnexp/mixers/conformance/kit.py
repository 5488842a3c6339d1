"""What every check of the kit shares: the size it checks at, the mixer's factory, the random inputs, and how a
difference is measured."""

from __future__ import annotations

import copy
import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from attnexp.errors import AttnexpError, MixerError
from attnexp.mixers.contract import declares_causal_only, make_mixer
from attnexp.mixers.request import MixerRequest

TOL = 1e-5  # relative: rounding of one formula computed in another order (another batch size, another kernel)
FUSED_TOL = 1e-4  # relative: a fused path against the explicit formula
ZERO_GRAD = 1e-6  # a gradient below this share of the largest is taken as zero
CAUSAL_TOKENS = 64  # a causal mixer (a language model's) is checked at least this long: past any chunk or window
Factory = Callable[..., nn.Module]
Outcome = tuple[bool | None, str]  # passed (None: does not apply), and what was measured
Start = Callable[[nn.Module], None]  # gives a built mixer other parameters than its constructor's


@dataclass(frozen=True)
class Size:
    """What the kit checks at: ``batch`` samples of ``queries`` tokens of width ``dim`` (self-attention), ``keys``
    context tokens for cross-attention (a number other than ``queries``, so a mix-up of the two shows), ``heads``
    (None: the mixer's own ``model.heads``) and ``causal``, what every mixer is asked to be unless a check asks
    otherwise (None: the mixer's own setting). The default is small; :meth:`of` takes a network's."""

    batch: int = 3
    queries: int = 6
    keys: int = 9
    dim: int = 16
    heads: int | None = None
    causal: bool | None = None

    own: int | None = None  # the network's number of tokens, where the checks run longer (a causal mixer)

    @classmethod
    def of(cls, request: MixerRequest, batch: int = 3) -> Size:
        """The size a network asks its mixer for: its width, heads, number of tokens (the default's when not fixed)
        and causality. A causal mixer (a language model's) is checked at :data:`CAUSAL_TOKENS` tokens at least: a
        chunk or a window a short sequence fits inside hides what crosses its boundary (one token more where that
        length is the width or a head's: the line of a leak is found by the axes of the tokens)."""
        own = request.num_tokens or cls.queries
        queries = max(own, CAUSAL_TOKENS) if request.causal else own
        if request.causal and queries != own and queries in (request.dim, request.dim // max(request.heads, 1)):
            queries += 1
        return cls(batch, queries, queries + 3, request.dim, request.heads, request.causal, own)

    def describe(self) -> str:
        heads = f"{self.heads} head{'s' * (self.heads != 1)}" if self.heads else "the mixer's heads"
        tokens = f"{self.queries} tokens ({self.keys} keys for cross-attention)"
        if self.own is not None and self.own != self.queries:
            tokens += f" (the network's {self.own}; a causal mixer at least {CAUSAL_TOKENS}: past any chunk or window)"
        return f"width {self.dim}, {heads}, batch {self.batch}, {tokens}" + (", causal" if self.causal else "")


@dataclass
class Result:
    """One check: ``ok`` True (passed), False (failed) or None (does not apply), and what was measured."""

    name: str
    ok: bool | None
    measured: str


class NotMeasurable(ArithmeticError):
    """Two outputs a check compares hold a NaN or an infinity: no difference between them means anything (the
    checks of finiteness say where it was made)."""


class Kit:
    """The mixer's factory, the size and the random inputs every check uses; ``start``: the parameters each build gets
    instead of its constructor's (:func:`moved`, :func:`trained`); ``tol``: the relative difference a comparison
    allows; ``device``: where the inputs live (a run's certification checks its mixers where they trained)."""

    def __init__(
        self,
        factory: Factory,
        seed: int = 0,
        size: Size | None = None,
        start: Start | None = None,
        tol: float = TOL,
        device: torch.device | str = "cpu",
    ) -> None:
        """``size.causal`` None and a mixer that declares ``causal_only``: every build is causal, as it must be."""
        size = size or Size()
        if size.causal is None and declares_causal_only(factory):
            size = replace(size, causal=True)
        self.factory, self.seed, self.size, self.start, self.tol = factory, seed, size, start, tol
        self.device = torch.device(device)
        self.gen = torch.Generator().manual_seed(seed + 1)
        s = self.size
        self.x = self.noise(s.batch, s.queries, s.dim)  # (B, Lq, C)
        self.context = self.noise(s.batch, s.keys, s.dim)  # (B, Lk, C)
        self.given: dict[str, Tensor] = {}  # the other inputs of a run's call (its context, its mask)
        self.training = False  # builds in training mode, dropout off (:func:`training_mode`)

    @classmethod
    def on_call(cls, mixer: nn.Module, x: Tensor, given: dict[str, Tensor], tol: float, training: bool) -> Kit:
        """A kit whose every build is a copy of ``mixer`` (a trained network's), whose tokens are those of one of its
        calls (``x`` (B, L, C) and ``given``: its context and mask), in eval or ``training`` mode: the checks on what
        a run's mixer receives from its own data."""
        request = getattr(mixer, "request", None)
        heads = getattr(request, "heads", None)
        size = Size(x.shape[0], x.shape[1], x.shape[1], x.shape[2], heads, getattr(request, "causal", None))
        kit = cls(lambda **_: copy.deepcopy(mixer), 0, size, tol=tol, device=x.device)
        kit.x, kit.given, kit.training = x, given, training
        return kit

    def alone(self) -> dict[str, Tensor]:
        """:attr:`given` for the batch's first sample alone (a mask broadcast over the batch as it is)."""
        return {k: v[:1] if v.shape[0] == self.size.batch else v for k, v in self.given.items()}

    def build(self, **request: object) -> nn.Module:
        """The mixer for ``request`` (self-attention over the queries unless ``num_tokens`` says otherwise), built
        after seeding torch with the kit's seed, in eval mode, without the output guard of a network's mixers (the
        checks measure what it returns)."""
        torch.manual_seed(self.seed)
        s = self.size
        base = {"dim": s.dim, "num_tokens": s.queries, **({"heads": s.heads} if s.heads else {})}
        if s.causal is not None:
            base["causal"] = s.causal
        mixer = make_mixer(self.factory, **{**base, **request})
        mixer = training_mode(mixer) if self.training else mixer.eval()
        if self.start is not None:
            with torch.no_grad():
                self.start(mixer)
        return mixer

    def at(self, start: Start) -> Kit:
        """This kit (its inputs and random stream) building its mixers with ``start``'s parameters."""
        other = copy.copy(self)
        other.start = start
        return other

    def noise(self, *shape: int) -> Tensor:
        return torch.randn(*shape, generator=self.gen).to(self.device)

    def padding_mask(self, keys: int, front: bool = False) -> Tensor:
        """Sample b hides its last b + 1 keys (at most all but one); ``front``: its first ones, the padding a causal
        layer's queries can see past.  # (B, 1, 1, Lk)"""
        hidden = (1 + torch.arange(self.size.batch)).clamp_max(keys - 1)[:, None]
        shown = torch.arange(keys) >= hidden if front else torch.arange(keys) < keys - hidden
        return shown.view(self.size.batch, 1, 1, keys)

    def sees_nothing(self, keys: int) -> Tensor:
        """Every query of sample 0 sees no key; the other samples see them all.  # (B, 1, 1, Lk)"""
        mask = torch.ones(self.size.batch, 1, 1, keys, dtype=torch.bool)
        mask[0] = False
        return mask


def moved(seed: int, draw: int) -> Start:
    """Parameters a mixer can reach in training: every parameter moved by noise of its own scale (draw ``draw`` of a
    stream seeded by ``seed``). A parameter's scale is the spread of its values (an identity kernel's included); one
    with no spread has its size (a vector of ones, a scalar temperature); one of zeros the typical spread of the
    mixer's parameters. Mixers of one structure get the same noise."""

    def move(mixer: nn.Module) -> None:
        gen = torch.Generator().manual_seed(1_000_003 * seed + draw + 1)
        params = [p for _, p in sorted(mixer.named_parameters(), key=lambda item: item[0])]
        spreads = [float(p.std()) for p in params if p.numel() > 1 and float(p.std()) > 0]
        typical = statistics.median(spreads) if spreads else 1.0
        for p in params:
            p.add_(torch.randn(p.shape, generator=gen).to(p) * own_scale(p, typical))

    return move


def own_scale(p: Tensor, typical: float) -> float:
    """The spread of ``p``'s values; their size where they have none; ``typical`` where they are zeros."""
    spread = float(p.std()) if p.numel() > 1 else 0.0
    size = float(p.abs().mean()) if p.numel() else 0.0
    return spread or size or typical


def trained(state: Mapping[str, Tensor]) -> Start:
    """A mixer's parameters as training left them (its ``state_dict``), for each build whose parameters have the same
    names and shapes (the others keep their constructor's)."""

    def load(mixer: nn.Module) -> None:
        own = mixer.state_dict()
        if own.keys() == state.keys() and all(own[k].shape == state[k].shape for k in own):
            mixer.load_state_dict(state)

    return load


def allowed(mixer: nn.Module, mask: Tensor) -> Tensor:
    """The pairs ``mixer`` may weigh under ``mask``: the mask, and the causal mask when the mixer was built causal.
    # (B, 1, Lq, Lk)"""
    request = getattr(mixer, "request", None)
    if not getattr(request, "causal", False):
        return mask
    return mask & torch.ones(mask.shape[-1], mask.shape[-1], dtype=torch.bool).tril()


def training_mode(mixer: nn.Module) -> nn.Module:
    """``mixer`` in training mode, as it trains, with its dropout off (the same numbers twice): an ``nn.Dropout``
    module in eval mode, a dropout rate kept as a number (``model.dropout``) at 0. On a copy only: it changes the
    module."""
    mixer.train()
    for module in mixer.modules():
        if isinstance(module, DROPOUTS):
            module.eval()
        elif isinstance(getattr(module, "dropout", None), float):
            setattr(module, "dropout", 0.0)  # noqa: B010  # a rate kept as a number, as MultiHeadAttention keeps it
    return mixer


DROPOUTS = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)


def relative(a: Tensor, b: Tensor) -> float:
    """Largest |a - b| over (1 + the largest |b|); another shape counts as infinite. A NaN or an infinity in either
    raises :class:`NotMeasurable`: it is no difference of the two."""
    if a.shape != b.shape:
        return math.inf
    a, b = a.detach().float(), b.detach().float()
    if a.numel() == 0:
        return 0.0
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        raise NotMeasurable("a NaN or infinity in the outputs compared")
    return float((a - b).abs().max()) / (1.0 + float(b.abs().max()))


def finite(*outputs: Tensor) -> bool:
    """Whether every value of ``outputs`` is finite."""
    return all(bool(torch.isfinite(t).all()) for t in outputs)


def refusal(err: AttnexpError) -> AttnexpError:
    """``err`` when it is a mixer's refusal (of a request, of masks); a :class:`MixerError` (a broken contract: a
    shape of another size, weights that are not what they are said to be) is raised on: it fails the check."""
    if isinstance(err, MixerError):
        raise err
    return err


def short(err: BaseException) -> str:
    """The first sentence of an error's message."""
    text = " ".join(str(err).split())
    first = text.split(". ")[0].rstrip(".")
    return first if len(first) <= 160 else first[:157] + "..."
