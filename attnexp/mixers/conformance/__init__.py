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

from collections.abc import Callable
from typing import NamedTuple

import torch

from attnexp.mixers.conformance import layout, masks, numerics, requests, weights
from attnexp.mixers.conformance.kit import Factory, Kit, Outcome, Result, Size
from attnexp.mixers.faults import raised_in_mixer


class Check(NamedTuple):
    name: str
    run: Callable[[Kit], Outcome]
    passes: str  # when it passes, in a line (attnexp-check --help, docs/mixers.md)


CHECKS = (
    Check("shapes", layout.shapes, "outputs (B, Lq, C) at the length checked and one longer, self- and cross-attention; "
          "weights (B, H, Lq, Lk); a wrong shape named beside the expected one"),
    Check("token layout", layout.token_layout, "permuting the tokens of a non-causal self-attention permutes the output "
          "alike (mixers that declare permutation_equivariant): catches tokens and width swapped"),
    Check("batch independence", layout.batch_independence, "a sample's output is the same alone and beside other samples"),
    Check("no causal leak", masks.causal_leak, "asked to be causal, changing later tokens moves no earlier output"),
    Check("key padding invisible", masks.padding_invisible, "changing the keys a padding mask hides moves no output"),
    Check("fully masked rows", masks.fully_masked_rows, "a query that sees no key gives finite numbers; zeros for distributions"),
    Check("weights as declared", weights.weights_as_declared, "the weights are what weight_kind says (rows summing to 1; "
          "no negative weight unless signed); masked pairs at 0; NaN fails on its own"),
    Check("gradients", numerics.gradients, "every parameter gets a finite gradient, zero only where the output ignores it"),
    Check("same seed, same output", numerics.same_seed, "the same seed builds the same parameters and bit-identical outputs"),
    Check("finite in bf16", numerics.finite_in_bf16, "under bf16 autocast every output is finite, fully masked rows included"),
    Check("mismatched shapes refused", requests.mismatched_shapes, "a context or mask that does not fit, a float mask, "
          "tokens of another width: errors, not numbers"),
    Check("contract options", requests.contract_options, "each request (causal, heads=2, out_proj=false, "
          "shared_over_channels, num_tokens=null) honoured or refused with a reason; a misspelt option raises"),
    Check("fused equals explicit", numerics.fused_equals_explicit, "every fused path gives the explicit formula's "
          "outputs and input gradients (relative 1e-4), with and without masks"),
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
        except Exception as err:
            ok, measured = False, raised(err)
        results.append(Result(check.name, ok, measured))
    return results


def raised(err: BaseException) -> str:
    """A check's measure when it raised: the error, and where in the mixer's code."""
    where = raised_in_mixer(err)
    return f"raised {type(err).__name__}: {' '.join(str(err).split())[:300]}" + (f" (in {where})" if where else "")


__all__ = ["CHECKS", "Check", "Kit", "Result", "Size", "run_checks"]
