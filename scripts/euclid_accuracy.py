"""Euclid's error against float64, values and gradients, on each path and precision.

Cases: ``near 1e-2`` ... ``near 1e-6``: every query has two keys, at distance delta and 2 delta (16 queries and
keys, head dim 16, inputs of norm ~8, eps 1e-9); ``equal``: integer vectors, two keys equal to a query (distance
exactly 0); ``random``: Gaussian q, k, v (no near key). The reference is the formula in float64 from the same inputs
(rounded to the precision first, so the table shows the attention's own error), distances from the differences.
Errors are relative to the reference's largest magnitude: max |out - ref| / max |ref|, and the same for the
gradient of q, k and v for one random output gradient (the largest of the three).

    PYTHONPATH=. python scripts/euclid_accuracy.py [--markdown euclid_accuracy.md]
"""

from __future__ import annotations

import argparse
import os
import platform

import torch

from attnexp.mixers.euclid.formula import euclid_score
from attnexp.mixers.euclid.ops.fused import fused_euclid_attention
from attnexp.mixers.multihead import attention

EPS = 1e-9
PRECISIONS = {"float32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def explicit(q, k, v, scale, eps):
    return attention(euclid_score(q, k, scale, eps), v, None)[0]


def fused(q, k, v, scale, eps):
    return fused_euclid_attention(q, k, v, None, scale, eps)


PATHS = {"explicit": explicit, "fused": fused}


def cases() -> dict[str, tuple[torch.Tensor, ...]]:
    """Each case's q, k, v (1, 2, 16, 16), float32."""
    found = {}
    for delta in (1e-2, 1e-3, 1e-4, 1e-5, 1e-6):
        torch.manual_seed(1)
        q, v = torch.randn(1, 2, 16, 16) * 2, torch.randn(1, 2, 16, 16)
        u = torch.nn.functional.normalize(torch.randn(1, 2, 16, 16), dim=-1)
        k = torch.cat([q[:, :, :8] + delta * u[:, :, :8], q[:, :, :8] + 2 * delta * u[:, :, 8:]], dim=2)
        found[f"near {delta:g}"] = (q, k, v)
    torch.manual_seed(10)
    q, k, v = (torch.randint(-2, 3, (1, 2, 16, 16)).float() for _ in range(3))
    k[:, :, 2], k[:, :, 6] = q[:, :, 4], q[:, :, 4]
    found["equal"] = (q, k, v)
    torch.manual_seed(3)
    found["random"] = tuple(torch.randn(1, 2, 16, 16) for _ in range(3))
    return found


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, eps: float) -> torch.Tensor:
    squared = (q.unsqueeze(-2) - k.unsqueeze(-3)).square().sum(-1)
    distance = torch.where(squared > 0, squared.clamp_min(1e-300).sqrt(), torch.zeros_like(squared))
    return (1.0 / (distance * q.shape[-1] ** -0.5 + eps)).softmax(-1) @ v


def errors(path: str, precision: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[float, float]:
    """(value error, gradient error) of ``path`` at ``precision`` against float64, relative to the reference's size."""
    low = PRECISIONS[precision]
    inputs = [t.to(low or torch.float32).requires_grad_() for t in (q, k, v)]
    exact = [t.detach().double().requires_grad_() for t in inputs]
    ref = reference(*exact, EPS)
    grad = torch.randn(ref.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with torch.autocast("cpu", dtype=low, enabled=low is not None):
        out = PATHS[path](*inputs, q.shape[-1] ** -0.5, EPS)
    got = torch.autograd.grad(out, inputs, grad.to(out.dtype))
    want = torch.autograd.grad(ref, exact, grad)
    value = ((out.double() - ref).abs().max() / ref.abs().max()).item()
    gradient = max(((g.double() - w).abs().max() / w.abs().max().clamp_min(1e-30)).item() for g, w in zip(got, want))
    return value, gradient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()
    columns = [(path, precision) for precision in PRECISIONS for path in PATHS]
    lines = [
        "| case | " + " | ".join(f"{path} {precision}: value / gradient" for path, precision in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for name, (q, k, v) in cases().items():
        cells = [errors(path, precision, q, k, v) for path, precision in columns]
        lines.append(f"| {name} | " + " | ".join(f"{a:.1e} / {b:.1e}" for a, b in cells) + " |")
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}"
    text = (
        "\n".join(lines) + f"\n\neuclid_accuracy: errors relative to the float64 reference's largest value; {machine}\n"
    )
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
