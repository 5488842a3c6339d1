"""Attention-kernel benchmark: time and peak memory of every variant's kernel against L.

Batch 8, 8 heads, head dim 64, float32. Variants (the kernels the modules run):
``sdpa`` (dot: ``F.scaled_dot_product_attention``), ``masked`` (causal SDPA), ``dot explicit``
(the naive softmax(q.k) v), ``euclid`` (the module's automatic path), ``euclid tiled`` (tiles
of queries with a hand-written backward, element-wise work fused by torch.compile; O(L) memory),
``euclid explicit`` (the expansion formula, eager),
``euclid cdist`` (the naive formula with torch.cdist), ``euclid flex`` (FlexAttention,
compiled; forward only on CPU). Variants alternate within each L; times are medians, ratios
are against ``sdpa`` in the same run. Peak memory is the growth of the process's peak RSS
during one call (peak reset through /proc/self/clear_refs, freed heap pages released first with
glibc's malloc_trim), measured after all timings; Linux/glibc only.

    PYTHONPATH=. python scripts/bench_attention.py --lengths 64 256 1024 2048 4096 --plot bench_attention.png
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import statistics
import time
from typing import Callable

import torch

from attnexp.attention import DotAttention, EuclidAttention, MultiHeadAttention
from attnexp.attention.cosine import CosineAttention
from attnexp.attention.l2 import L2Attention
from attnexp.attention.euclid_tiled import tiled_euclid_attention
from attnexp.attention.distance import euclid_score
from attnexp.attention.euclid import flex_euclid_attention
from attnexp.attention.multihead import softmax_attention

B, H, D, EPS = 8, 8, 64, 1e-9
SCALE = D**-0.5
LIBC = ctypes.CDLL("libc.so.6")
Kernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

# Peak float32 (B, H, L, L) buffers a variant holds at once in forward+backward (measured at L=1024), for --max-gb.
SQUARE_BUFFERS = {"sdpa": 0, "masked": 0, "euclid flex": 0, "euclid tiled": 0, "euclid": 0, "dot explicit": 3, "euclid explicit": 8, "euclid cdist": 6,
                  "l2": 0, "cosine": 0}


def variants() -> dict[str, Kernel]:
    dot, masked, euclid = DotAttention(B * D, heads=H), DotAttention(B * D, heads=H, causal=True), EuclidAttention(B * D, heads=H, eps=EPS)
    l2, cosine = L2Attention(B * D, heads=H), CosineAttention(B * D, heads=H)  # cosine: learned temperature
    return {
        "sdpa": lambda q, k, v: dot.attend(q, k, v, None, False)[0],
        "masked": lambda q, k, v: masked.attend(q, k, v, None, False)[0],
        "dot explicit": lambda q, k, v: MultiHeadAttention.attend(dot, q, k, v, None, False)[0],
        "euclid": lambda q, k, v: euclid.attend(q, k, v, None, False)[0],
        "euclid tiled": lambda q, k, v: tiled_euclid_attention(q, k, v, None, SCALE, EPS),
        "euclid explicit": lambda q, k, v: softmax_attention(euclid_score(q, k, SCALE, EPS), v, None)[0],
        "euclid cdist": lambda q, k, v: (1.0 / (torch.cdist(q, k) * SCALE + EPS)).softmax(-1) @ v,
        "euclid flex": lambda q, k, v: flex_euclid_attention(*flex_inputs(q, k, v), None, SCALE, EPS, compiled=True),
        "l2": lambda q, k, v: l2.attend(q, k, v, None, False)[0],
        "cosine": lambda q, k, v: cosine.attend(q, k, v, None, False)[0],
    }


def flex_inputs(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """FlexAttention refuses CPU inputs that require grad, even under no_grad."""
    return [t if t.is_cuda else t.detach() for t in tensors]


def forward_only(name: str) -> bool:
    """FlexAttention has no backward on CPU in current torch."""
    return name == "euclid flex" and not torch.cuda.is_available()


def inputs(length: int) -> tuple[torch.Tensor, ...]:
    """q, k, v (B, H, L, D) requiring grad, and the output gradient used for the backward pass."""
    torch.manual_seed(0)
    return (*(torch.randn(B, H, length, D, requires_grad=True) for _ in range(3)), torch.randn(B, H, length, D))


def run(kernel: Kernel, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor, backward: bool) -> float:
    """Seconds for one forward (no grad) or forward+backward call (the gradients of q, k, v)."""
    started = time.perf_counter()
    if backward:
        torch.autograd.grad(kernel(q, k, v), (q, k, v), dout)
    else:
        with torch.no_grad():
            kernel(q, k, v)
    return time.perf_counter() - started


def peak_mb(kernel: Kernel, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor, backward: bool) -> float:
    """Growth of the peak resident set during one call, in MB (Linux: VmHWM reset by clear_refs)."""
    gc.collect()
    LIBC.malloc_trim(0)  # freed heap pages leave the resident set, so reusing them counts again
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = vm_kb("VmRSS")
    run(kernel, q, k, v, dout, backward)
    return (vm_kb("VmHWM") - before) / 1024


def vm_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 1024, 2048])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1: the machine is shared)")
    parser.add_argument("--max-gb", type=float, default=8.0, help="skip a variant whose (B, H, L, L) buffers would pass this")
    parser.add_argument("--only", nargs="+", help="variants to run (default: all)")
    parser.add_argument("--plot", default="bench_attention.png")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    kernels = {n: f for n, f in variants().items() if not args.only or n in args.only or n == "sdpa"}
    rows: dict[tuple[str, int], dict[str, float]] = {}
    for length in args.lengths:
        qkvd = inputs(length)
        fits = {n: SQUARE_BUFFERS[n] * B * H * length**2 * 4 / 1e9 <= args.max_gb for n in kernels}
        live = [n for n in kernels if fits[n]]
        for name in live:  # warm-up: compiles the tiled and flex kernels for this shape
            run(kernels[name], *qkvd, backward=False)
            if not forward_only(name):
                run(kernels[name], *qkvd, backward=True)
        times: dict[str, dict[str, list[float]]] = {n: {"fwd": [], "fwd+bwd": []} for n in live}
        for _ in range(args.repeats):
            for name in live:
                times[name]["fwd"].append(run(kernels[name], *qkvd, backward=False))
                if not forward_only(name):
                    times[name]["fwd+bwd"].append(run(kernels[name], *qkvd, backward=True))
        for name in kernels:
            rows[name, length] = {key: statistics.median(ts) for key, ts in times[name].items() if ts} if fits[name] else {}
    for length in args.lengths:
        qkvd = inputs(length)
        for name, row in ((n, rows[n, length]) for n in kernels):
            if row:
                row["peak fwd MB"] = peak_mb(kernels[name], *qkvd, backward=False)
                if not forward_only(name):
                    row["peak fwd+bwd MB"] = peak_mb(kernels[name], *qkvd, backward=True)
        report_length(length, kernels, rows)
    load = os.getloadavg()
    print(f"\nbench_attention: B={B} H={H} D={D} float32, {args.threads} thread(s), median of {args.repeats}; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; torch {torch.__version__}")
    plot(args.plot, args.lengths, kernels, rows)


def report_length(length: int, kernels: dict[str, Kernel], rows: dict) -> None:
    base = rows["sdpa", length]
    print(f"\nL={length}\n{'variant':<17}{'fwd ms':>9}{'x sdpa':>8}{'fwd+bwd ms':>12}{'x sdpa':>8}{'peak fwd MB':>13}{'peak f+b MB':>13}")
    for name in kernels:
        r = rows[name, length]
        if not r:
            print(f"{name:<17}{'skipped: too large for --max-gb':>63}")
            continue
        fb = r.get("fwd+bwd")
        fb_cols = f"{fb * 1e3:>12.1f}{fb / base['fwd+bwd']:>8.2f}" if fb else f"{'n/a (CPU)':>12}{'':>8}"
        print(f"{name:<17}{r['fwd'] * 1e3:>9.1f}{r['fwd'] / base['fwd']:>8.2f}{fb_cols}{r['peak fwd MB']:>13.0f}{r.get('peak fwd+bwd MB', float('nan')):>13.0f}")


def plot(path: str, lengths: list[int], kernels: dict[str, Kernel], rows: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for name in kernels:
        for ax, key, scale in ((axes[0], "fwd", 1e3), (axes[1], "fwd+bwd", 1e3), (axes[2], "peak fwd+bwd MB", 1)):
            points = [(n, rows[name, n][key] * scale) for n in lengths if key in rows[name, n]]
            if key == "peak fwd+bwd MB" and forward_only(name):
                points = [(n, rows[name, n]["peak fwd MB"]) for n in lengths if rows[name, n]]
            if points:
                ax.plot([n for n, _ in points], [max(y, 1.0) for _, y in points], marker="o", label=name)
    for ax, title in zip(axes, ("forward ms", "forward+backward ms", "peak memory MB (flex: forward)")):
        ax.set(xscale="log", yscale="log", xlabel="sequence length L", title=title)
        ax.set_xticks(lengths, [str(n) for n in lengths])
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
