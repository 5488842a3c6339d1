"""The check of the weights a mixer returns against what it says they are (its ``weight_kind``): on the kit's random
inputs, and on a run's first batch (:func:`weight_problems`, which a run's telemetry calls)."""

from __future__ import annotations

import torch
from torch import Tensor

from attnexp.errors import AttnexpError
from attnexp.mixers.conformance.kit import TOL, Kit, Outcome, allowed, refusal
from attnexp.mixers.contract import DISTRIBUTIONS, SIGNED, weight_kind
from attnexp.mixers.tracing import computed_at


def weights_as_declared(kit: Kit) -> Outcome:
    """Weights returned with ``need_weights`` hold what the mixer's ``weight_kind`` says: rows that sum to 1 (0 on a
    row that sees nothing) for distributions, no weight below 0 unless signed; masked pairs weigh exactly 0 whatever
    the kind (the causal mask's too); a NaN or infinite weight fails on its own, apart from the sign."""
    mask = kit.padding_mask(kit.size.queries)
    mask[0] = False
    mixer = kit.build()
    try:
        weights = mixer(kit.x, mask=mask, need_weights=True)[1]
    except AttnexpError as err:
        refusal(err)
        weights = mixer(kit.x, need_weights=True)[1]
        mask = torch.ones_like(mask)
    if weights is None or weights.dim() != 4:
        return None, "no attention weights returned"
    problems, measured = weight_problems(weights, allowed(mixer, mask), weight_kind(mixer))
    if not problems:
        return True, measured + "; masked pairs at 0"
    rerun = lambda: mixer(kit.x, mask=mask, need_weights=True)[1]  # noqa: E731
    computed = computed_at(mixer, rerun, not weights.isfinite().all(), numbers=True)
    return False, f"{measured}; {'; '.join(problems)}{computed}"


def weight_problems(weights: Tensor, allowed: Tensor, kind: str, tol: float = TOL) -> tuple[list[str], str]:
    """What is wrong with ``weights`` (B, H, Lq, Lk) for weights of ``kind`` where ``allowed`` (True: the pair may be
    weighed; broadcast to the weights) says which pairs count, and what was measured; ``tol``: how far a row of
    distributions may sum from 1."""
    w = weights.detach().float()
    allowed = allowed.to(w.device).expand_as(w)
    finite = torch.isfinite(w)
    sums = w.nan_to_num(0.0, 0.0, 0.0).sum(-1)  # (B, H, Lq), the non-finite weights counted apart
    problems = [f"{int((~finite).sum())} NaN or infinite weights"] if not finite.all() else []
    negative = int((w < 0).sum())
    if negative and kind != SIGNED:
        problems.append(f'{negative} negative weights (weights that may be negative say weight_kind = "signed")')
    on_masked = float(w.masked_fill(allowed, 0.0).nan_to_num(0.0).abs().max()) if w.numel() else 0.0
    if on_masked:
        problems.append(f"weight {on_masked:.2g} on a masked pair")
    if kind == DISTRIBUTIONS:
        expected = allowed.any(-1).float()  # 1, or 0 on a row that sees nothing
        rows = finite.all(-1)
        worst = float((sums - expected)[rows].abs().max()) if rows.any() else 0.0
        if worst > tol:
            problems.append("rows that do not sum to 1")
        return problems, f"distributions: largest |row sum - 1| {worst:.2g}"
    measured = f"{kind}: row sums from {float(sums.min()):.3g} to {float(sums.max()):.3g}" if w.numel() else kind
    if kind == SIGNED:
        share = float(w.clamp_max(0).nan_to_num(0.0).abs().sum() / w.nan_to_num(0.0).abs().sum().clamp_min(1e-30))
        measured += f", {share:.2g} of the weight negative"
    return problems, measured
