"""The conformance kit (``attnexp-check``): what a mixer must do before a comparison with it means anything.

Each check builds the mixer from its factory (the ``model`` config) through the contract
(:mod:`attnexp.mixers.contract`) on small random inputs, on the CPU, and measures one number. A check a mixer
cannot take part in by design (no cross-attention for ``mlp``, no fused path for ``sigmoid``) passes when the
mixer refuses the request with :class:`~attnexp.errors.AttnexpError`, saying why, or does not apply. The
attention checks run on both of a mixer's paths: without weights (``model.path``'s choice, often fused) and with
them (the explicit formula).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers.contract import build_mixer

BATCH, QUERIES, KEYS, DIM = 3, 6, 9, 16  # queries != keys, so cross-attention shows a mix-up of the two
TOL = 1e-5  # relative: rounding of one formula computed in another order (another batch size, another kernel)
FUSED_TOL = 1e-4  # relative: a fused path against the explicit formula
ZERO_GRAD = 1e-6  # a gradient below this share of the largest is taken as zero
Factory = Callable[..., nn.Module]


@dataclass
class Result:
    """One check: ``ok`` True (passed), False (failed) or None (does not apply), and what was measured."""

    name: str
    ok: bool | None
    measured: str


class Kit:
    """The mixer's factory, the inputs, and the checks (:meth:`run`)."""

    def __init__(self, factory: Factory, seed: int = 0) -> None:
        self.factory, self.seed = factory, seed
        gen = torch.Generator().manual_seed(seed + 1)
        self.x = torch.randn(BATCH, QUERIES, DIM, generator=gen)  # (B, Lq, C)
        self.context = torch.randn(BATCH, KEYS, DIM, generator=gen)  # (B, Lk, C)
        self.gen = gen

    def build(self, **request: object) -> nn.Module:
        """The mixer for ``request`` (self-attention over the queries unless ``num_tokens`` says otherwise), built
        after seeding torch with the kit's seed, in eval mode."""
        torch.manual_seed(self.seed)
        return build_mixer(self.factory, **{"dim": DIM, "num_tokens": QUERIES, **request}).eval()

    def noise(self, *shape: int) -> Tensor:
        return torch.randn(*shape, generator=self.gen)

    def run(self) -> list[Result]:
        """Every check, in order; a check that raises fails with the error as its measure. A mixer that cannot be
        built as configured (a bad option) raises its error here, before any check."""
        self.build()
        checks = [("shapes", self.shapes), ("batch independence", self.batch_independence),
                  ("no causal leak", self.causal_leak), ("key padding invisible", self.padding_invisible),
                  ("fully masked rows", self.fully_masked_rows), ("weights as declared", self.weights_as_declared),
                  ("gradients", self.gradients), ("same seed, same output", self.same_seed),
                  ("finite in bf16", self.finite_in_bf16), ("mismatched shapes refused", self.mismatched_shapes),
                  ("contract options", self.contract_options), ("fused equals explicit", self.fused_equals_explicit)]
        results = []
        for name, check in checks:
            try:
                with torch.no_grad():  # the checks that need gradients ask for them
                    ok, measured = check()
            except Exception as err:
                ok, measured = False, f"raised {type(err).__name__}: {' '.join(str(err).split())[:300]}"
            results.append(Result(name, ok, measured))
        return results

    def shapes(self) -> tuple[bool | None, str]:
        """Self-attention gives (B, Lq, C) and weights (B, H, Lq, Lq); cross-attention (B, Lq, C) and (B, H, Lq, Lk)."""
        mixer = self.build()
        outs = [mixer(self.x, need_weights=w) for w in (False, True)]
        wrong = [f"self {tuple(o.shape)}" for o, _ in outs if o.shape != self.x.shape] + weights_shape(outs[1][1], QUERIES, QUERIES)
        measured = f"self {tuple(outs[0][0].shape)}"
        try:
            cross = self.build(num_tokens=KEYS, causal=False)
            outs = [cross(self.x, context=self.context, need_weights=w) for w in (False, True)]
            wrong += [f"cross {tuple(o.shape)}" for o, _ in outs if o.shape != self.x.shape] + weights_shape(outs[1][1], QUERIES, KEYS)
            measured += f", cross {tuple(outs[0][0].shape)} from {KEYS} keys"
        except AttnexpError as err:
            measured += f"; cross-attention refused: {short(err)}"
        return not wrong, measured + (f"; wrong: {', '.join(wrong)}" if wrong else "")

    def batch_independence(self) -> tuple[bool, str]:
        """A sample's output is the same alone as in a batch, and whatever the other samples hold."""
        mixer, changed = self.build(), self.x.clone()
        changed[1:] = self.noise(BATCH - 1, QUERIES, DIM)
        worst = 0.0
        for w in (False, True):
            out = mixer(self.x, need_weights=w)[0]
            worst = max(worst, relative(mixer(self.x[:1], need_weights=w)[0], out[:1]), relative(mixer(changed, need_weights=w)[0][:1], out[:1]))
        return worst <= TOL, f"largest change of sample 0 {worst:.2g} (alone, or beside other samples)"

    def causal_leak(self) -> tuple[bool, str]:
        """Asked to be causal, no output moves when a later token changes."""
        try:
            mixer = self.build(causal=True)
        except AttnexpError as err:
            return True, f"causal refused: {short(err)}"
        worst, where = 0.0, 0
        for w in (False, True):
            out = mixer(self.x, need_weights=w)[0]
            for t in range(1, QUERIES):
                later = self.x.clone()
                later[:, t:] += self.noise(BATCH, QUERIES - t, DIM)
                change = relative(mixer(later, need_weights=w)[0][:, :t], out[:, :t])
                if change > worst:
                    worst, where = change, t
        leak = f" (tokens from {where} on move earlier outputs)" if worst > TOL else ""
        return worst <= TOL, f"largest change of an earlier output {worst:.2g}{leak}"

    def padding_mask(self, keys: int) -> Tensor:
        """Sample b hides its last b + 1 keys.  # (B, 1, 1, Lk)"""
        return (torch.arange(keys) < keys - 1 - torch.arange(BATCH)[:, None]).view(BATCH, 1, 1, keys)

    def padding_invisible(self) -> tuple[bool, str]:
        """Changing the keys a padding mask hides moves no output of a query that may see them (self- and cross-attention)."""
        mask = self.padding_mask(QUERIES)
        try:
            mixer = self.build()
            mixer(self.x, mask=mask)
        except AttnexpError as err:
            return True, f"masks refused: {short(err)}"
        hidden = ~mask.view(BATCH, QUERIES, 1)
        changed = torch.where(hidden, self.noise(BATCH, QUERIES, DIM), self.x)
        visible = ~hidden.expand_as(self.x)
        worst = max(relative(mixer(changed, mask=mask, need_weights=w)[0][visible], mixer(self.x, mask=mask, need_weights=w)[0][visible])
                    for w in (False, True))
        measured = "self"
        try:
            cross, mask = self.build(num_tokens=KEYS, causal=False), self.padding_mask(KEYS)
            context = torch.where(~mask.view(BATCH, KEYS, 1), self.noise(BATCH, KEYS, DIM), self.context)
            worst = max(worst, *(relative(cross(self.x, context=context, mask=mask, need_weights=w)[0],
                                          cross(self.x, context=self.context, mask=mask, need_weights=w)[0]) for w in (False, True)))
            measured += " and cross"
        except AttnexpError:
            pass
        return worst <= TOL, f"largest change when hidden keys change ({measured}-attention) {worst:.2g}"

    def fully_masked_rows(self) -> tuple[bool, str]:
        """A query that may see no key gives finite numbers; for softmax-like weights (``distributions``) exactly zero
        weights and, without an output projection, a zero output."""
        mask = torch.ones(BATCH, 1, 1, QUERIES, dtype=torch.bool)
        mask[0] = False  # every query of sample 0 sees nothing
        try:
            mixer = self.build(out_proj=False)
            outs = [mixer(self.x, mask=mask, need_weights=w) for w in (False, True)]
        except AttnexpError as err:
            return True, f"masks or out_proj=False refused: {short(err)}"
        nonfinite = sum(int((~torch.isfinite(o)).sum()) for o, _ in outs)
        if nonfinite:
            return False, f"{nonfinite} NaN or infinite outputs"
        if not getattr(mixer, "distributions", False):
            return True, "outputs finite (the weights are not distributions: no zeros asked)"
        largest = max(float(o[0].abs().max()) for o, _ in outs)
        weights = outs[1][1]
        if weights is not None and weights.dim() == 4:
            largest = max(largest, float(weights[0].abs().max()))
        return largest == 0.0, f"outputs finite, largest output or weight of a fully masked row {largest:.2g} (0 for a softmax)"

    def weights_as_declared(self) -> tuple[bool | None, str]:
        """Weights returned with ``need_weights`` sum to 1 per row when the mixer says they are ``distributions``
        (0 on a fully masked row), and are never negative or NaN."""
        mask = self.padding_mask(QUERIES)
        mask[0] = False
        mixer = self.build()
        try:
            weights = mixer(self.x, mask=mask, need_weights=True)[1]
        except AttnexpError:
            weights = mixer(self.x, need_weights=True)[1]
            mask = torch.ones_like(mask)
        if weights is None or weights.dim() != 4:
            return None, "no attention weights returned"
        sums = weights.float().sum(-1)  # (B, H, Lq)
        bad = int((~torch.isfinite(weights)).sum()) + int((weights < 0).sum())
        if getattr(mixer, "distributions", False):
            expected = mask.any(-1).float().expand_as(sums)  # 1, or 0 on a row that sees nothing
            worst = float((sums - expected).abs().max())
            return worst <= TOL and not bad, f"distributions: largest |row sum - 1| {worst:.2g}" + (f"; {bad} negative or NaN weights" if bad else "")
        return not bad, (f"not distributions: row sums from {float(sums.min()):.3g} to {float(sums.max()):.3g}"
                         + (f"; {bad} negative or NaN weights" if bad else ""))

    def gradients(self) -> tuple[bool, str]:
        """Every parameter gets a finite gradient, non-zero unless the output does not depend on the parameter
        (a key bias under softmax: every score of a row moves alike)."""
        mixer = self.build()
        grad_out = self.noise(BATCH, QUERIES, DIM)
        with torch.enable_grad():
            (mixer(self.x)[0] * grad_out).sum().backward()
        params = dict(mixer.named_parameters())
        if not params:
            return True, "no parameters"
        missing = [n for n, p in params.items() if p.grad is None]
        nonfinite = [n for n, p in params.items() if p.grad is not None and not torch.isfinite(p.grad).all()]
        if missing or nonfinite:
            return False, "; ".join(filter(None, [f"no gradient: {', '.join(missing)}" if missing else "",
                                                  f"NaN or infinite gradient: {', '.join(nonfinite)}" if nonfinite else ""]))
        norms = {n: float(p.grad.norm()) for n, p in params.items()}
        top = max(norms.values())
        zero = [n for n, v in norms.items() if v <= ZERO_GRAD * top]
        dead, invariant = [], []
        for name in zero:
            (invariant if self.output_ignores(name) else dead).append(name)
        measured = f"{len(params)} parameters, smallest non-zero gradient norm {min((v for v in norms.values() if v > ZERO_GRAD * top), default=0):.2g}"
        if invariant:
            measured += f"; zero where the output ignores the parameter: {', '.join(invariant)}"
        if dead:
            measured += f"; zero gradient though the output depends on it: {', '.join(dead)}"
        return not dead and top > 0, measured

    def output_ignores(self, name: str) -> bool:
        """Whether changing parameter ``name`` leaves the output as it is (so its zero gradient is right)."""
        mixer = self.build()
        out = mixer(self.x)[0]
        param = dict(mixer.named_parameters())[name]
        param.add_(self.noise(*param.shape) * (0.5 + float(param.abs().mean())))
        return relative(mixer(self.x)[0], out) <= TOL

    def same_seed(self) -> tuple[bool, str]:
        """Two mixers built after the same seed hold the same parameters and give bit-identical outputs, twice."""
        first, second = self.build(), self.build()
        states = [m.state_dict() for m in (first, second)]
        same_params = states[0].keys() == states[1].keys() and all(torch.equal(states[0][k], states[1][k]) for k in states[0])
        outs = [first(self.x)[0], second(self.x)[0], first(self.x)[0]]
        worst = max(float((o - outs[0]).abs().max()) for o in outs[1:])
        return same_params and worst == 0.0, f"largest difference {worst:.2g}" + ("" if same_params else "; the parameters differ")

    def finite_in_bf16(self) -> tuple[bool, str]:
        """Under bf16 autocast (``trainer.precision=bf16-mixed``) every output is finite, fully masked rows included."""
        mixer, mask = self.build(), torch.ones(BATCH, 1, 1, QUERIES, dtype=torch.bool)
        mask[0] = False  # sample 0 sees nothing
        reference = mixer(self.x)[0]
        masks = [None, mask]
        nonfinite, worst = 0, 0.0
        for m in masks:
            for w in (False, True):
                try:
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        out = mixer(self.x, mask=m, need_weights=w)[0]
                except AttnexpError:
                    continue
                nonfinite += int((~torch.isfinite(out)).sum())
                if m is None:
                    worst = max(worst, relative(out.float(), reference))
        return not nonfinite, f"{nonfinite} NaN or infinite outputs; largest difference from float32 {worst:.2g} (relative)"

    def mismatched_shapes(self) -> tuple[bool, str]:
        """Inputs that do not fit together raise an error instead of broadcasting into numbers."""
        mixer = self.build()
        cases = {
            "a context of another batch": dict(context=self.context[:1]),
            "a mask of another key length": dict(mask=torch.ones(BATCH, 1, 1, QUERIES + 1, dtype=torch.bool)),
            "a mask of another batch": dict(mask=torch.ones(BATCH + 1, 1, 1, QUERIES, dtype=torch.bool)),
            "a float mask": dict(mask=torch.ones(BATCH, 1, 1, QUERIES)),
        }
        computed = []
        for label, kwargs in cases.items():
            try:
                mixer(self.x, **kwargs)
                computed.append(label)
            except Exception:
                pass
        try:
            mixer(self.noise(BATCH, QUERIES, DIM + 1))
            computed.append("tokens of another width")
        except Exception:
            pass
        total = len(cases) + 1
        return not computed, f"{total - len(computed)} of {total} refused" + (f"; numbers computed for {', '.join(computed)}" if computed else "")

    def contract_options(self) -> tuple[bool, str]:
        """Each request of the contract is honoured (the mixer builds and runs; ``heads`` shows in the weights) or refused
        with :class:`AttnexpError`; a misspelt option raises instead of being ignored."""
        honoured, refused, wrong = [], [], []
        for key, value in (("causal", True), ("heads", 2), ("out_proj", False), ("shared_over_channels", True), ("num_tokens", None)):
            label = f"{key}={value}"
            try:
                mixer = self.build(**{key: value})
            except AttnexpError:
                refused.append(label)
                continue
            out, weights = mixer(self.x, need_weights=True)
            heads = getattr(mixer, "heads", None)
            if out.shape != self.x.shape or (key == "heads" and (heads not in (None, 2) or (weights is not None and weights.dim() == 4 and weights.shape[1] != 2))):
                wrong.append(label)
            else:
                honoured.append(label)
        try:
            self.build(hedas=2)
            wrong.append("a misspelt option (hedas=2) ignored")
        except (TypeError, AttnexpError):
            pass
        measured = f"{len(honoured)} honoured" + (f", refused: {', '.join(refused)}" if refused else "") + "; a misspelt option raises"
        return not wrong, measured if not wrong else f"not honoured: {', '.join(wrong)}"

    def fused_equals_explicit(self) -> tuple[bool | None, str]:
        """Each fused path gives the explicit formula's outputs and gradients, with and without masks."""
        paths = tuple(getattr(self.build(), "fused_paths", ()) or ())
        if not paths:
            return None, "no fused path: the formula is the only path"
        parts, ok = [], True
        for path in paths:
            try:
                worst_out, worst_grad = 0.0, None
                for request, mask in ((dict(causal=False), None), (dict(causal=True), None), (dict(causal=False), self.padding_mask(QUERIES))):
                    mixers = [self.build(path=which, **request) for which in ("explicit", path)]
                    worst_out = max(worst_out, relative(mixers[1](self.x, mask=mask)[0], mixers[0](self.x, mask=mask)[0]))
                    grads = [input_gradient(m, self.x, mask) for m in mixers]
                    if grads[1] is not None:
                        worst_grad = max(worst_grad or 0.0, relative(grads[1], grads[0]))
            except (AttnexpError, RuntimeError, NotImplementedError) as err:
                parts.append(f"{path}: not run here ({short(err)})")
                continue
            ok = ok and worst_out <= FUSED_TOL and (worst_grad is None or worst_grad <= FUSED_TOL)
            grad = "no backward here" if worst_grad is None else f"gradient {worst_grad:.2g}"
            parts.append(f"{path}: output {worst_out:.2g}, {grad}")
        return ok, "largest relative difference from explicit: " + "; ".join(parts)


def input_gradient(mixer: nn.Module, x: Tensor, mask: Tensor | None) -> Tensor | None:
    """d sum(output) / dx, or None where the path has no backward on this device (FlexAttention without a GPU)."""
    x = x.clone().requires_grad_(True)
    try:
        with torch.enable_grad():
            mixer(x, mask=mask)[0].sum().backward()
    except RuntimeError:
        return None
    return x.grad


def weights_shape(weights: Tensor | None, queries: int, keys: int) -> list[str]:
    """What is wrong with attention weights' shape: (B, H, Lq, Lk) for 4-D weights; gates and None pass."""
    if weights is None or weights.dim() != 4 or (weights.shape[0] == BATCH and weights.shape[-2:] == (queries, keys)):
        return []
    return [f"weights {tuple(weights.shape)}"]


def relative(a: Tensor, b: Tensor) -> float:
    """Largest |a - b| over (1 + the largest |b|); NaN anywhere counts as infinite."""
    if a.shape != b.shape:
        return math.inf
    a, b = a.detach().float(), b.detach().float()
    diff = (a - b).abs()
    if diff.numel() == 0:
        return 0.0
    if not torch.isfinite(diff).all():
        return math.inf
    return float(diff.max()) / (1.0 + float(b.abs().max()))


def short(err: BaseException) -> str:
    """The first sentence of an error's message."""
    text = " ".join(str(err).split())
    first = text.split(". ")[0].rstrip(".")
    return first if len(first) <= 160 else first[:157] + "..."


def run_checks(factory: Factory, seed: int = 0) -> list[Result]:
    """Every check of the kit on the mixer ``factory`` builds (a ``model`` config, instantiated)."""
    return Kit(factory, seed).run()
