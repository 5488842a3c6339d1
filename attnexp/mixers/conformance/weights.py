"""The check of the weights a mixer returns against what it says they are (its ``weight_kind``)."""

from __future__ import annotations

import torch

from attnexp.errors import AttnexpError
from attnexp.mixers.conformance.kit import TOL, Kit, Outcome
from attnexp.mixers.contract import DISTRIBUTIONS, SIGNED, weight_kind


def weights_as_declared(kit: Kit) -> Outcome:
    """Weights returned with ``need_weights`` hold what the mixer's ``weight_kind`` says: rows that sum to 1 (0 on a
    row that sees nothing) for distributions, no weight below 0 unless signed; masked pairs weigh exactly 0 whatever
    the kind; a NaN or infinite weight fails on its own, apart from the sign."""
    mask = kit.padding_mask(kit.size.queries)
    mask[0] = False
    mixer = kit.build()
    try:
        weights = mixer(kit.x, mask=mask, need_weights=True)[1]
    except AttnexpError:
        weights = mixer(kit.x, need_weights=True)[1]
        mask = torch.ones_like(mask)
    if weights is None or weights.dim() != 4:
        return None, "no attention weights returned"
    kind, w = weight_kind(mixer), weights.detach().float()
    finite = torch.isfinite(w)
    sums = w.nan_to_num(0.0, 0.0, 0.0).sum(-1)  # (B, H, Lq), the non-finite weights counted apart
    problems = [f"{int((~finite).sum())} NaN or infinite weights"] if not finite.all() else []
    negative = int((w < 0).sum())
    if negative and kind != SIGNED:
        problems.append(f'{negative} negative weights (weights that may be negative say weight_kind = "signed")')
    on_masked = float(w.masked_fill(mask, 0.0).nan_to_num(0.0).abs().max())
    if on_masked:
        problems.append(f"weight {on_masked:.2g} on a masked pair")
    if kind == DISTRIBUTIONS:
        expected = mask.any(-1).float().expand_as(sums)  # 1, or 0 on a row that sees nothing
        rows = finite.all(-1)
        worst = float((sums - expected)[rows].abs().max()) if rows.any() else 0.0
        if worst > TOL:
            problems.append("rows that do not sum to 1")
        measured = f"distributions: largest |row sum - 1| {worst:.2g}"
    else:
        measured = f"{kind}: row sums from {float(sums.min()):.3g} to {float(sums.max()):.3g}"
        if kind == SIGNED:
            share = float(w.clamp_max(0).nan_to_num(0.0).abs().sum() / w.nan_to_num(0.0).abs().sum().clamp_min(1e-30))
            measured += f", {share:.2g} of the weight negative"
    return not problems, measured + (f"; {'; '.join(problems)}" if problems else "; masked pairs at 0")
