"""Checks of the numbers: gradients, the same numbers from the same seed, bf16, and fused paths against the formula."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers.conformance.kit import (
    FUSED_TOL,
    TOL,
    ZERO_GRAD,
    Kit,
    NotMeasurable,
    Outcome,
    finite,
    refusal,
    relative,
    short,
)


def gradients(kit: Kit) -> Outcome:
    """Every parameter gets a finite gradient, non-zero unless the output does not depend on the parameter
    (a key bias under softmax: every score of a row moves alike). A gradient far below the others but not zero is
    reported and passes: a mechanism may start flat (small initial scores) and still learn."""
    mixer = kit.build()
    grad_out = kit.noise(*kit.x.shape)
    with torch.enable_grad():
        (mixer(kit.x)[0] * grad_out).sum().backward()
    params = dict(mixer.named_parameters())
    if not params:
        return True, "no parameters"
    missing = [n for n, p in params.items() if p.grad is None]
    nonfinite = [n for n, p in params.items() if p.grad is not None and not torch.isfinite(p.grad).all()]
    if missing or nonfinite:
        return False, "; ".join(
            filter(
                None,
                [
                    f"no gradient: {', '.join(missing)}" if missing else "",
                    f"NaN or infinite gradient: {', '.join(nonfinite)}" if nonfinite else "",
                ],
            )
        )
    norms = {n: float(p.grad.norm()) for n, p in params.items() if p.grad is not None}  # every one (missing: above)
    top = max(norms.values())
    dead: list[str] = []
    invariant: list[str] = []
    faint: list[str] = []
    for name in [n for n, v in norms.items() if v <= ZERO_GRAD * top]:
        (invariant if output_ignores(kit, name) else dead if norms[name] == 0.0 else faint).append(name)
    smallest = min((v for v in norms.values() if v > ZERO_GRAD * top), default=0)
    measured = f"{len(params)} parameters, smallest non-zero gradient norm {smallest:.2g}"
    if invariant:
        measured += f"; zero where the output ignores the parameter: {', '.join(invariant)}"
    if faint:
        measured += f"; below {ZERO_GRAD:g} of the largest but not zero (a flat start): {', '.join(faint)}"
    if dead:
        measured += f"; zero gradient though the output depends on it: {', '.join(dead)}"
    return not dead and top > 0, measured


def output_ignores(kit: Kit, name: str) -> bool:
    """Whether changing parameter ``name`` leaves the output as it is (so its zero gradient is right)."""
    mixer = kit.build()
    out = mixer(kit.x)[0]
    param = dict(mixer.named_parameters())[name]
    param.add_(kit.noise(*param.shape) * (0.5 + float(param.abs().mean())))
    return relative(mixer(kit.x)[0], out) <= TOL


def same_seed(kit: Kit) -> Outcome:
    """Two mixers built after the same seed hold the same parameters and give bit-identical outputs, twice."""
    first, second = kit.build(), kit.build()
    states = [m.state_dict() for m in (first, second)]
    same_params = states[0].keys() == states[1].keys() and all(
        torch.equal(states[0][k], states[1][k]) for k in states[0]
    )
    outs = [first(kit.x)[0], second(kit.x)[0], first(kit.x)[0]]
    if not finite(*outs):
        raise NotMeasurable("a NaN or infinity in the outputs compared")
    worst = max(float((o - outs[0]).abs().max()) for o in outs[1:])
    return same_params and worst == 0.0, f"largest difference {worst:.2g}" + (
        "" if same_params else "; the parameters differ"
    )


def finite_in_bf16(kit: Kit) -> Outcome:
    """Under bf16 autocast (``trainer.precision=bf16-mixed``) every output is finite, fully masked rows included."""
    mixer = kit.build()
    reference = mixer(kit.x)[0]
    nonfinite, worst = 0, 0.0
    for mask in (None, kit.sees_nothing(kit.size.queries)):
        for w in (False, True):
            try:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    out = mixer(kit.x, mask=mask, need_weights=w)[0]
            except AttnexpError as err:
                refusal(err)
                continue
            nonfinite += int((~torch.isfinite(out)).sum())
            if mask is None and finite(out, reference):
                worst = max(worst, relative(out.float(), reference))
    return not nonfinite, f"{nonfinite} NaN or infinite outputs; largest difference from float32 {worst:.2g} (relative)"


def fused_equals_explicit(kit: Kit) -> Outcome:
    """Each fused path gives the explicit formula's outputs and gradients, non-causal and causal, with and without a
    padding mask (each as far as the mixer accepts it: a causal-only mixer is compared causal)."""
    paths = tuple(getattr(kit.build(), "fused_paths", ()) or ())
    if not paths:
        return None, "no fused path: the formula is the only path"
    s = kit.size
    cases = (
        (False, None),
        (True, None),
        (False, kit.padding_mask(s.queries)),
        (True, kit.padding_mask(s.queries, front=True)),
    )
    parts, ok = [], True
    for path in paths:
        worst_out, worst_grad, compared, why = 0.0, None, 0, ""
        for causal, mask in cases:
            try:
                mixers = [kit.build(path=which, causal=causal) for which in ("explicit", path)]
                outs = [m(kit.x, mask=mask)[0] for m in mixers]
            except (AttnexpError, RuntimeError, NotImplementedError) as err:
                if isinstance(err, AttnexpError):
                    refusal(err)
                why = why or short(err)
                continue
            compared += 1
            worst_out = max(worst_out, relative(outs[1], outs[0]))
            grads = [input_gradient(m, kit.x, mask) for m in mixers]
            if grads[1] is not None:  # a fused gradient where the formula gives none is as wrong as can be
                worst_grad = max(worst_grad or 0.0, math.inf if grads[0] is None else relative(grads[1], grads[0]))
        if not compared:
            parts.append(f"{path}: not run here ({why})")
            continue
        ok = ok and worst_out <= FUSED_TOL and (worst_grad is None or worst_grad <= FUSED_TOL)
        grad = "no backward here" if worst_grad is None else f"gradient {worst_grad:.2g}"
        parts.append(f"{path}: output {worst_out:.2g}, {grad} ({compared} of {len(cases)} cases)")
    return ok, "largest relative difference from explicit: " + "; ".join(parts)


def input_gradient(mixer: nn.Module, x: Tensor, mask: Tensor | None) -> Tensor | None:
    """d sum(output) / dx, or None where the path has no backward on this device (a kernel written for GPUs only)."""
    x = x.clone().requires_grad_(True)
    try:
        with torch.enable_grad():
            mixer(x, mask=mask)[0].sum().backward()
    except RuntimeError:
        return None
    return x.grad
