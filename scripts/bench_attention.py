"""Attention-kernel benchmark: time and peak memory of every variant's kernel against L.

Batch 8, 8 heads, head dim 64, float32. Mixers' paths: ``sdpa`` (dot: ``F.scaled_dot_product_attention``),
``masked`` (causal SDPA), ``dot explicit`` (softmax(q.k) v through autograd), ``euclid`` (``model.path=auto``: the
fused autograd function, tiled from 256 x 256 scores on, O(tile) memory), ``euclid explicit`` (the formula through
autograd), ``euclid flex`` (FlexAttention, compiled: GPUs only), ``l2`` and ``cosine`` (their SDPA paths). They
alternate within each L; times are medians, ratios are against ``sdpa`` in the same run. Peak memory is the growth
of the peak resident set during one call, each measured in a fresh process (Linux: /proc/self/status).

    PYTHONPATH=. python scripts/bench_attention.py --lengths 64 256 1024 2048 4096 --plot bench_attention.png
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

from attnexp.mixers import CosineAttention, DotAttention, EuclidAttention, L2Attention

B, H, D, EPS = 8, 8, 64, 1e-9
Kernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

# Peak float32 (B, H, L, L) buffers a path holds at once in forward+backward, for --max-gb.
SQUARE_BUFFERS = {"sdpa": 0, "masked": 0, "dot explicit": 3, "euclid": 0, "euclid explicit": 8, "euclid flex": 0, "l2": 0, "cosine": 0}


def variants() -> dict[str, Kernel]:
    """Each path as a function of (B, H, L, D) q, k, v, on the GPU when there is one."""
    width = H * D
    mixers = {"sdpa": DotAttention(width, heads=H), "masked": DotAttention(width, heads=H, causal=True),
              "dot explicit": DotAttention(width, heads=H, path="explicit"), "euclid": EuclidAttention(width, heads=H, eps=EPS),
              "euclid explicit": EuclidAttention(width, heads=H, eps=EPS, path="explicit"),
              "l2": L2Attention(width, heads=H), "cosine": CosineAttention(width, heads=H)}  # cosine: learned temperature
    if torch.cuda.is_available():
        mixers["euclid flex"] = EuclidAttention(width, heads=H, eps=EPS, path="flex")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return {name: attend_of(m.to(device)) for name, m in mixers.items()}


def attend_of(mixer: torch.nn.Module) -> Kernel:
    """The mixer's path for (B, H, L, D) q, k, v: what its forward calls after the projections."""
    return lambda q, k, v: mixer.attend(q, k, v, None, False)[0]


def inputs(length: int) -> tuple[torch.Tensor, ...]:
    """q, k, v (B, H, L, D) requiring grad, and the output gradient used for the backward pass."""
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return (*(torch.randn(B, H, length, D, device=device, requires_grad=True) for _ in range(3)), torch.randn(B, H, length, D, device=device))


def run(kernel: Kernel, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dout: torch.Tensor, backward: bool) -> float:
    """Seconds for one forward (no grad) or forward+backward call (the gradients of q, k, v)."""
    if q.is_cuda:
        torch.cuda.synchronize()
    started = time.perf_counter()
    if backward:
        torch.autograd.grad(kernel(q, k, v), (q, k, v), dout)
    else:
        with torch.no_grad():
            kernel(q, k, v)
    if q.is_cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - started


def peak_mb(name: str, length: int, backward: bool) -> float:
    """Growth of the peak memory during one call of ``name`` at ``length``, in MB, measured in a fresh process (freed
    pages of earlier calls would otherwise be reused unseen): the GPU's peak allocation, or on a CPU the peak
    resident set (Linux's VmHWM) over the resident set before the call."""
    code = (f"import json, sys; sys.argv = ['x']; from scripts.bench_attention import *; print(json.dumps(one_peak({name!r}, "
            f"{length}, {backward})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))})
    return json.loads(out.stdout.splitlines()[-1])


def one_peak(name: str, length: int, backward: bool) -> float:
    """:func:`peak_mb` inside its fresh process."""
    torch.set_num_threads(1)
    kernel, qkvd = variants()[name], inputs(length)
    if qkvd[0].is_cuda:
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        run(kernel, *qkvd, backward=backward)
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    before = vm_kb("VmRSS")
    run(kernel, *qkvd, backward=backward)
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
        for name in live:  # warm-up (flex compiles its kernel for this shape)
            run(kernels[name], *qkvd, backward=False)
            run(kernels[name], *qkvd, backward=True)
        times: dict[str, dict[str, list[float]]] = {n: {"fwd": [], "fwd+bwd": []} for n in live}
        for _ in range(args.repeats):
            for name in live:
                times[name]["fwd"].append(run(kernels[name], *qkvd, backward=False))
                times[name]["fwd+bwd"].append(run(kernels[name], *qkvd, backward=True))
        for name in kernels:
            rows[name, length] = {key: statistics.median(ts) for key, ts in times[name].items() if ts} if fits[name] else {}
    for length in args.lengths:
        for name, row in ((n, rows[n, length]) for n in kernels):
            if row:
                row["peak fwd MB"] = peak_mb(name, length, backward=False)
                row["peak fwd+bwd MB"] = peak_mb(name, length, backward=True)
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
        fb = r["fwd+bwd"]
        print(f"{name:<17}{r['fwd'] * 1e3:>9.1f}{r['fwd'] / base['fwd']:>8.2f}{fb * 1e3:>12.1f}{fb / base['fwd+bwd']:>8.2f}"
              f"{r['peak fwd MB']:>13.0f}{r['peak fwd+bwd MB']:>13.0f}")


def plot(path: str, lengths: list[int], kernels: dict[str, Kernel], rows: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for name in kernels:
        for ax, key, scale in ((axes[0], "fwd", 1e3), (axes[1], "fwd+bwd", 1e3), (axes[2], "peak fwd+bwd MB", 1)):
            points = [(n, rows[name, n][key] * scale) for n in lengths if key in rows[name, n]]
            if points:
                ax.plot([n for n, _ in points], [max(y, 1.0) for _, y in points], marker="o", label=name)
    for ax, title in zip(axes, ("forward ms", "forward+backward ms", "peak memory MB, forward+backward")):
        ax.set(xscale="log", yscale="log", xlabel="sequence length L", title=title)
        ax.set_xticks(lengths, [str(n) for n in lengths])
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
