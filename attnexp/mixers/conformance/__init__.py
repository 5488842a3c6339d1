"""The conformance kit (``attnexp-check``): what a mixer must do before a comparison with it means anything.

Each check builds the mixer from its factory (the ``model`` config) through the contract
(:mod:`attnexp.mixers.contract`) on random inputs of a :class:`Size` (a network's, or a small default), on the CPU,
and measures one number. A check a mixer cannot take part in by design (no cross-attention for ``mlp``, no fused
path for ``sigmoid``) passes when the mixer refuses the request with :class:`~attnexp.errors.AttnexpError`, saying
why, or does not apply. The attention checks run on both of a mixer's paths: without weights (``model.path``'s
choice, often fused) and with them (the explicit formula). A check that raises fails, with the error and where in
the mixer's code it was raised.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import torch

from attnexp.errors import MixerError
from attnexp.mixers.conformance import layout, masks, numerics, requests, weights
from attnexp.mixers.conformance.kit import Factory, Kit, NotMeasurable, Outcome, Result, Size
from attnexp.mixers.faults import raised_in_mixer
from attnexp.mixers.tracing import traced


class Check(NamedTuple):
    name: str
    run: Callable[[Kit], Outcome]


# In order; configs/check.yaml's help and docs/mixers.md say what each measures.
CHECKS = (
    Check("shapes", layout.shapes),
    Check("token layout", layout.token_layout),
    Check("batch independence", layout.batch_independence),
    Check("no causal leak", masks.causal_leak),
    Check("key padding invisible", masks.padding_invisible),
    Check("fully masked rows", masks.fully_masked_rows),
    Check("weights as declared", weights.weights_as_declared),
    Check("gradients", numerics.gradients),
    Check("same seed, same output", numerics.same_seed),
    Check("finite in bf16", numerics.finite_in_bf16),
    Check("mismatched shapes refused", requests.mismatched_shapes),
    Check("contract options", requests.contract_options),
    Check("fused equals explicit", numerics.fused_equals_explicit),
)


def run_checks(factory: Factory, seed: int = 0, size: Size | None = None) -> list[Result]:
    """Every check of the kit, in order, on the mixer ``factory`` builds (a ``model`` config, instantiated), at ``size``
    (the small default when None). A mixer that cannot be built as configured (a bad option) raises its error here,
    before any check."""
    kit = Kit(factory, seed, size)
    kit.build()
    results = []
    for check in CHECKS:
        try:
            with torch.no_grad():  # the checks that need gradients ask for them
                ok, measured = check.run(kit)
        except NotMeasurable:
            ok, measured = None, not_measurable(kit)
        except Exception as err:
            ok, measured = False, raised(err)
        results.append(Result(check.name, ok, measured))
    return results


def not_measurable(kit: Kit) -> str:
    """A comparison's measure when the outputs it compares hold a NaN or infinity: where the mixer first made one
    (the checks of finiteness fail on it), never a difference."""
    found = None
    for w in (True, False):
        try:
            mixer = kit.build()
        except Exception:
            break
        found = traced(functools.partial(mixer, kit.x, need_weights=w, **kit.given))[0].first_nonfinite(mixer)
        if found is not None:
            break
    where = f"at {found.file}:{found.line}, in {found.function}" if found else "in its outputs"
    return f"not measurable: NaN first made {where} (the outputs compared hold a NaN or infinity)"


def raised(err: BaseException) -> str:
    """A check's measure when it raised: the error, and where in the mixer's code."""
    where = None if isinstance(err, MixerError) else raised_in_mixer(err)  # a MixerError names where it was wrong
    return f"raised {type(err).__name__}: {' '.join(str(err).split())[:300]}" + (f" (in {where})" if where else "")


__all__ = ["CHECKS", "Check", "Kit", "NotMeasurable", "Result", "Size", "not_measurable", "run_checks"]
