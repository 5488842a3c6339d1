"""Every built-in mixer on every path it trains with, built the same way for the unit and GPU tiers."""

from __future__ import annotations

import torch

from attnexp.mixers import (
    CosineAttention,
    DenseMixer,
    DotAttention,
    EuclidAttention,
    L2Attention,
    SigmoidAttention,
    SqueezeExcitation,
)

B, L, C = 3, 6, 8  # batch, tokens, width
MIXERS = {
    "dot": (DotAttention, {"heads": 2}),
    "masked": (DotAttention, {"heads": 2, "causal": True}),
    "euclid": (EuclidAttention, {"heads": 2}),
    "l2": (L2Attention, {"heads": 2}),
    "cosine": (CosineAttention, {"heads": 2}),
    "sigmoid": (SigmoidAttention, {"heads": 2}),
    "se": (SqueezeExcitation, {}),
    "mlp": (DenseMixer, {}),
}
CASES = [
    (name, path)
    for name, (cls, _) in MIXERS.items()
    for path in (("explicit", *cls.fused_paths) if hasattr(cls, "fused_paths") else (None,))
]
IDS = [f"{name}-{path}" if path else name for name, path in CASES]


def build(name: str, path: str | None, device: str = "cpu", tokens: int = L) -> torch.nn.Module:
    """The mixer ``name`` on ``path`` (None: it has one), seeded, in training mode."""
    cls, options = MIXERS[name]
    options = {**options, **({"num_tokens": tokens} if name == "mlp" else {}), **({"path": path} if path else {})}
    torch.manual_seed(0)
    with torch.device(device):
        return cls(C, **options).train()


def masks(name: str, device: str = "cpu", tokens: int = L) -> list[torch.Tensor | None]:
    """No mask, and a key padding mask blocking the last token of the second example (B, 1, 1, L); mlp takes none."""
    if name == "mlp":
        return [None]
    padding = torch.ones(B, 1, 1, tokens, dtype=torch.bool, device=device)
    padding[1, ..., -1] = False
    return [None, padding]
