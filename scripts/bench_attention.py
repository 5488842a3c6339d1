"""Attention-kernel benchmark: time and peak memory of every variant's kernel against L.

Batch 8, 8 heads, head dim 64, float32 (``--precision bf16``: under bf16 autocast, as
``trainer.precision=bf16-mixed`` runs). Mixers' paths: ``sdpa`` (dot: ``F.scaled_dot_product_attention``),
``masked`` (causal SDPA), ``dot explicit`` (softmax(q.k) v through autograd), ``euclid`` (``model.path=auto``: on a
GPU its Triton kernel, O(L) memory; on a CPU the rows function, O(tile)), ``euclid explicit`` (the formula),
``l2`` and ``cosine`` (their SDPA paths). They alternate within each L; times are medians, ratios are against
``sdpa`` in the same run. Peak memory is the growth of the peak during one call, each measured in a fresh process
(the GPU's peak allocation; on a CPU the peak resident set, Linux: /proc/self/status). On a GPU every call ends with
a synchronisation, so a call's time is the GPU's.

    PYTHONPATH=. python scripts/bench_attention.py --lengths 64 256 1024 2048 4096 --plot bench_attention.png
    PYTHONPATH=. python scripts/bench_attention.py --lengths 50 1024 8192 --precision bf16 --markdown gpu.md
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
from pathlib import Path

import torch
from smoke import parsed

from attnexp.mixers import CosineAttention, DotAttention, EuclidAttention, L2Attention

B, H, D, EPS = 8, 8, 64, 1e-9
Kernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

# Peak float32 (B, H, L, L) buffers a path holds at once in forward+backward, for --max-gb.
SQUARE_BUFFERS = {"sdpa": 0, "masked": 0, "dot explicit": 3, "euclid": 0, "euclid explicit": 8, "l2": 0, "cosine": 0}
PRECISION = {"32": None, "bf16": torch.bfloat16}


def variants() -> dict[str, Kernel]:
    """Each path as a function of (B, H, L, D) q, k, v, on the GPU when there is one."""
    width = H * D
    mixers = {
        "sdpa": DotAttention(width, heads=H),
        "masked": DotAttention(width, heads=H, causal=True),
        "dot explicit": DotAttention(width, heads=H, path="explicit"),
        "euclid": EuclidAttention(width, heads=H, eps=EPS),
        "euclid explicit": EuclidAttention(width, heads=H, eps=EPS, path="explicit"),
        "l2": L2Attention(width, heads=H),
        "cosine": CosineAttention(width, heads=H),
    }  # cosine: learned temperature
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return {name: attend_of(m.to(device)) for name, m in mixers.items()}


def attend_of(mixer: torch.nn.Module) -> Kernel:
    """The mixer's path for (B, H, L, D) q, k, v: what its forward calls after the projections (under autocast in
    ``--precision``, read from the environment variable the script sets)."""
    low = PRECISION[os.environ.get("BENCH_ATTENTION_PRECISION", "32")]

    def kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        with torch.autocast(q.device.type, dtype=low, enabled=low is not None):
            return mixer.attend(q, k, v, None, False)[0]

    return kernel


def inputs(length: int) -> tuple[torch.Tensor, ...]:
    """q, k, v (B, H, L, D) requiring grad, and the output gradient used for the backward pass."""
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return (
        *(torch.randn(B, H, length, D, device=device, requires_grad=True) for _ in range(3)),
        torch.randn(B, H, length, D, device=device),
    )


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
    code = (
        f"import json, sys; sys.argv = ['x']; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); "
        f"from bench_attention import *; print(json.dumps(one_peak({name!r}, {length}, {backward})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")]))},
    )
    return json.loads(out.stdout.splitlines()[-1])


def one_peak(name: str, length: int, backward: bool) -> float:
    """The growth of the peak memory during one call: in a fresh process of :func:`peak_mb` on a CPU, in this one on a
    GPU (whose peak allocation counter is exact)."""
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
    parser.add_argument(
        "--max-gb", type=float, default=8.0, help="skip a variant whose (B, H, L, L) buffers would pass this"
    )
    parser.add_argument("--only", nargs="+", help="variants to run (default: all)")
    parser.add_argument("--precision", choices=list(PRECISION), default="32")
    parser.add_argument("--plot", default="bench_attention.png")
    parser.add_argument("--markdown", help="append the tables to this Markdown file")
    args = parsed(parser, lengths=[64], repeats=1, only=["euclid"], plot=None, markdown=None)
    os.environ["BENCH_ATTENTION_PRECISION"] = args.precision  # the fresh processes of peak_mb read it too
    torch.set_num_threads(args.threads)
    kernels = {n: f for n, f in variants().items() if not args.only or n in args.only or n == "sdpa"}
    rows: dict[tuple[str, int], dict[str, float]] = {}
    for length in args.lengths:
        qkvd = inputs(length)
        fits = {n: SQUARE_BUFFERS[n] * B * H * length**2 * 4 / 1e9 <= args.max_gb for n in kernels}
        live = [n for n in kernels if fits[n]]
        for name in live:  # warm-up
            run(kernels[name], *qkvd, backward=False)
            run(kernels[name], *qkvd, backward=True)
        times: dict[str, dict[str, list[float]]] = {n: {"fwd": [], "fwd+bwd": []} for n in live}
        for _ in range(args.repeats):
            for name in live:
                times[name]["fwd"].append(run(kernels[name], *qkvd, backward=False))
                times[name]["fwd+bwd"].append(run(kernels[name], *qkvd, backward=True))
        for name in kernels:
            rows[name, length] = (
                {key: statistics.median(ts) for key, ts in times[name].items() if ts} if fits[name] else {}
            )
    for length in args.lengths:
        for name, row in ((n, rows[n, length]) for n in kernels):
            if row:  # a GPU's peak allocation is exact in this process; a CPU's resident set needs a fresh one
                peak = one_peak if torch.cuda.is_available() else peak_mb
                row["peak fwd MB"] = peak(name, length, backward=False)
                row["peak fwd+bwd MB"] = peak(name, length, backward=True)
    lines = [line for length in args.lengths for line in report_length(length, kernels, rows)]
    load = os.getloadavg()
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"{os.cpu_count()} CPUs"
    lines.append(
        f"\nbench_attention: B={B} H={H} D={D} precision {args.precision}, {args.threads} thread(s), median of "
        f"{args.repeats}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {device}; torch {torch.__version__}"
    )
    print("\n".join(lines))
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write("\n".join(lines) + "\n")
    if args.plot:
        plot(args.plot, args.lengths, kernels, rows)


def report_length(length: int, kernels: dict[str, Kernel], rows: dict) -> list[str]:
    """The rows of one length as a Markdown table."""
    base = rows["sdpa", length]
    lines = [
        f"\nL={length}\n",
        "| variant | fwd ms | x sdpa | fwd+bwd ms | x sdpa | peak fwd MB | peak fwd+bwd MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in kernels:
        r = rows[name, length]
        if not r:
            lines.append(f"| {name} | skipped: too large for --max-gb | | | | | |")
            continue
        fb = r["fwd+bwd"]
        lines.append(
            f"| {name} | {r['fwd'] * 1e3:.2f} | {r['fwd'] / base['fwd']:.2f} | {fb * 1e3:.2f} | "
            f"{fb / base['fwd+bwd']:.2f} | {r['peak fwd MB']:.0f} | {r['peak fwd+bwd MB']:.0f} |"
        )
    return lines


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
