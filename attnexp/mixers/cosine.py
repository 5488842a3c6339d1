"""Cosine attention (``model=cosine``): softmax(t * cos(q, k)) v with a temperature t per head."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from attnexp.errors import AttnexpError
from attnexp.mixers.multihead import MultiHeadAttention

MAX_TEMPERATURE = 100.0


class CosineAttention(MultiHeadAttention):
    """Scores are cosine similarities times a temperature: ``temperature="learned"`` learns one per head
    (as its logarithm, clamped so t <= 100), starting at sqrt(d), the spread of scaled dot-product logits
    at initialisation (the cosine of two random d-dimensional vectors has standard deviation 1/sqrt(d));
    a number fixes it (``1.0``: plain cosine similarity). Fused through SDPA on normalised q and k.
    """

    fused_paths = ("sdpa",)

    def __init__(self, dim: int, *, temperature: float | str = "learned", **options: Any) -> None:
        super().__init__(dim, **options)
        if temperature == "learned":
            start = math.log(math.sqrt(self.head_dim))
            self.log_temperature = nn.Parameter(torch.full((self.heads, 1, 1), start))  # (H, 1, 1)
        elif (
            isinstance(temperature, (int, float))
            and not isinstance(temperature, bool)
            and 0 < temperature <= MAX_TEMPERATURE
        ):
            self.register_buffer("log_temperature", torch.full((self.heads, 1, 1), math.log(temperature)))
        else:
            raise AttnexpError(
                f"model.temperature={temperature!r} is not allowed: it "
                f"is 'learned' or a number in (0, {MAX_TEMPERATURE:g}], "
                "e.g. model.temperature=learned or model.temperature=1.0 (plain cosine similarity)."
            )

    def temperature(self) -> Tensor:
        """The temperature of every head.  # (H, 1, 1)"""
        return self.log_temperature.clamp(max=math.log(MAX_TEMPERATURE)).exp()

    def score(self, q: Tensor, k: Tensor) -> Tensor:
        return ((q / unit_norm(q)) @ (k / unit_norm(k)).transpose(-2, -1)) * self.temperature()  # (B, H, Lq, Lk)

    def fused(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, path: str) -> Tensor:
        q_scaled = q * (self.temperature().to(q.dtype) / unit_norm(q))  # (B, H, Lq, D): t * q / ||q||, one pass
        return self.sdpa(q_scaled, k / unit_norm(k), v, mask, scale=1.0)  # (B, H, Lq, D)


def unit_norm(x: Tensor) -> Tensor:
    """The norm of every row, at least 1e-12 (as ``F.normalize``).  # (..., L, 1)"""
    return torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(1e-12)
