"""Euclid's error against float64, values and gradients, on each path and precision.

Cases (16 queries and keys, head dim 16, two heads, eps 1e-9; the reference is the formula in float64 from the same
inputs, rounded to the precision first, with distances from the differences):

- ``near δ``: every query has two keys, at distance δ and 2δ (inputs of norm ~8);
- ``offset δ``: the same, every vector moved by 20 along each axis (norms ~80: the expansion's rounding, a few
  ulps of the squared norms, is 100 times larger, and reaches the keys beyond the nearest);
- ``competing δ``: four queries each have four keys within δ, 1.25δ, 1.5δ and 2δ (more near keys than a path that
  computes two per query exactly can resolve);
- ``apart δ``: every query has two keys δ apart from each other, both 0.1 from it (the keys' gradients are a small
  difference of large terms, resolved to about 1e-2 in float32 on every path, the plain formula's included);
- ``equal``: integer vectors, two keys equal to a query (distance exactly 0); ``random``: Gaussian q, k, v.

Errors are relative to the reference's largest magnitude: max |out - ref| / max |ref|, and the same for the gradient
of q, k and v for one random output gradient (the largest of the three). Paths: ``explicit`` (the formula through
autograd), ``rows`` (the CPU path: rows found by reading the data, recomputed whole), ``fixed`` (fixed shapes, two
nearest keys per query: torch.compile and GPUs without Triton), ``triton`` (the GPU kernel, run here by Triton's
interpreter; bf16 and fp16 inputs go to it as they are, where the torch paths compute distances in float32 under
autocast), ``plain`` (the formula with every distance from its difference, no rule: the baseline each precision
gives).

    PYTHONPATH=. python scripts/euclid_accuracy.py [--markdown euclid_accuracy.md] [--paths rows triton]
"""

from __future__ import annotations

import argparse
import os
import platform

if __name__ == "__main__":  # Triton's interpreter, set before Triton is first imported: this script runs on the CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch

from attnexp.mixers.euclid.formula import euclid_score
from attnexp.mixers.euclid.ops.fixed import FixedEuclid
from attnexp.mixers.euclid.ops.fused import fused_euclid_attention
from attnexp.mixers.euclid.ops.kernel import operator as kernel
from attnexp.mixers.euclid.ops.rows import RowsEuclid
from attnexp.mixers.multihead import attention

EPS = 1e-9
PRECISIONS = {"float32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def explicit(q, k, v, scale, eps):
    return attention(euclid_score(q, k, scale, eps), v, None)[0]


def rows(q, k, v, scale, eps):
    return fused_euclid_attention(q, k, v, None, scale, eps, RowsEuclid)


def fixed(q, k, v, scale, eps):
    return fused_euclid_attention(q, k, v, None, scale, eps, FixedEuclid)


def triton(q, k, v, scale, eps):
    return kernel.triton_euclid_attention(q, k, v, None, False, scale, eps)


def plain(q, k, v, scale, eps):
    """The formula through autograd with every distance from its difference, no rule (the baseline of float32)."""
    distance = torch.linalg.vector_norm(q.unsqueeze(-2) - k.unsqueeze(-3), dim=-1)
    return (1.0 / (distance * scale + eps)).softmax(-1) @ v


PATHS = {"explicit": explicit, "rows": rows, "fixed": fixed, "triton": triton, "plain": plain}


def near_pairs(delta: float, offset: float = 0.0) -> tuple[torch.Tensor, ...]:
    """Keys at delta and 2 delta of each query.  # (1, 2, 16, 16) each"""
    torch.manual_seed(1)
    q, v = torch.randn(1, 2, 16, 16) * 2, torch.randn(1, 2, 16, 16)
    u = torch.nn.functional.normalize(torch.randn(1, 2, 16, 16), dim=-1)
    k = torch.cat([q[:, :, :8] + delta * u[:, :, :8], q[:, :, :8] + 2 * delta * u[:, :, 8:]], dim=2)
    return q + offset, k + offset, v


def apart(delta: float) -> tuple[torch.Tensor, ...]:
    """Every query has two keys delta apart, both 0.1 from it (a gradient float32 resolves badly on any path).
    # (1, 2, 16, 16) each"""
    torch.manual_seed(4)
    q, v = torch.randn(1, 2, 16, 16) * 2, torch.randn(1, 2, 16, 16)
    u = torch.nn.functional.normalize(torch.randn(1, 2, 16, 16), dim=-1)
    key = q[:, :, :8] + 0.1 * u[:, :, :8]
    return q, torch.cat([key, key + delta * u[:, :, 8:]], dim=2), v


def competing(delta: float) -> tuple[torch.Tensor, ...]:
    """Queries 0-3 each with four keys at delta, 1.25, 1.5 and 2 delta; the other keys random.  # (1, 2, 16, 16)"""
    torch.manual_seed(2)
    q, k, v = (torch.randn(1, 2, 16, 16) * 2 for _ in range(3))
    u = torch.nn.functional.normalize(torch.randn(1, 2, 16, 16), dim=-1)
    for i in range(4):
        for j, factor in enumerate((1.0, 1.25, 1.5, 2.0)):
            k[:, :, 4 * i + j] = q[:, :, i] + factor * delta * u[:, :, 4 * i + j]
    return q, k, v


def cases() -> dict[str, tuple[torch.Tensor, ...]]:
    """Each case's q, k, v (1, 2, 16, 16), float32."""
    found = {f"near {delta:g}": near_pairs(delta) for delta in (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)}
    found.update({f"offset {delta:g}": near_pairs(delta, 20.0) for delta in (1e-2, 1e-4, 1e-6)})
    found.update({f"competing {delta:g}": competing(delta) for delta in (1e-2, 1e-4, 1e-6)})
    found.update({f"apart {delta:g}": apart(delta) for delta in (1e-4, 1e-6)})
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
    with torch.autocast("cpu", dtype=low, enabled=low is not None and path != "triton"):
        out = PATHS[path](*inputs, q.shape[-1] ** -0.5, EPS)
    got = torch.autograd.grad(out, inputs, grad.to(out.dtype))
    want = torch.autograd.grad(ref, exact, grad)
    value = ((out.double() - ref).abs().max() / ref.abs().max()).item()
    gradient = max(((g.double() - w).abs().max() / w.abs().max().clamp_min(1e-30)).item() for g, w in zip(got, want))
    return value, gradient


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--paths", nargs="+", choices=list(PATHS), default=list(PATHS))
    parser.add_argument("--precisions", nargs="+", choices=list(PRECISIONS), default=list(PRECISIONS))
    args = parser.parse_args()
    paths = [p for p in args.paths if p != "triton" or (kernel.has_triton() and kernel.interpreting())]
    columns = [(path, precision) for precision in args.precisions for path in paths]
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
