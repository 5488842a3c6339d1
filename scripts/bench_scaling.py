"""Scaling benchmark: euclid's step and peak memory against dot's, over lengths, batches, head dims and threads.

Each cell is one attention layer (the mixer with its projections, one head: model dim = head dim) on a random
(batch, length, dim) input that requires its gradient; a step is forward, ``out.square().mean()`` and backward
(``model.path=auto``: dot through SDPA, euclid on a CPU through ``ops/rows.py``). Dot and euclid take turns step by
step (:func:`bench_step.interleaved`); a round's time is each one's median step in that round, and the ratio is the
median over rounds of euclid's time over dot's in the same round. ``--clock thread`` (one thread only) times each
step by the thread's CPU time, leaving out the time a shared machine gives to other processes.

Floor (a call past ``tiles.KEEP_SCORES`` scores, which goes tile by tile): the least any design of eager torch
operations that computes each tile once forward and once backward does, timed in the same rounds: euclid's tiles
(``ops/rows_tiles.plan``), each with its distances' matmul, ``rsqrt`` and ``exp2`` forward and again backward, and the
matmuls of the output and of dv, dp, dq and dk; no row sum, mask, exact row, scaling or Python besides the loop, and
not the layer's projections that euclid's and dot's steps also run (so below what a euclid step can reach).

Peak memory: the most tensor memory alive during two steps of a fresh layer, over what was alive before (torch's
memory profile of the CPU allocator: the inputs, weights and gradients of earlier steps left out; euclid's workspace
kept between calls counted), each in a fresh process (``--memory off`` skips it), dot then euclid.

    PYTHONPATH=. python scripts/bench_scaling.py --markdown scaling.md
    PYTHONPATH=. python scripts/bench_scaling.py --lengths 64 256 --batches 64 --dims 16 --threads 1
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from attnexp.mixers import DotAttention, EuclidAttention
from attnexp.mixers.euclid.ops.rows import memory_scores
from attnexp.mixers.euclid.ops.rows_tiles import augmented, plan
from attnexp.mixers.euclid.ops.tiles import CPU_TILE_SCORES, KEEP_SCORES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_step import interleaved  # the script beside this one
from smoke import parsed

MIXERS = {"dot": DotAttention, "euclid": EuclidAttention}


def stepper(name: str, batch: int, length: int, dim: int) -> Callable[[], None]:
    """One forward+backward step of a fresh seeded one-head attention layer of width ``dim`` on a fixed input."""
    torch.manual_seed(0)
    layer = MIXERS[name](dim, heads=1)
    x = torch.randn(batch, length, dim, requires_grad=True)

    def step() -> None:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        layer(x)[0].square().mean().backward()

    return step


def floor_stepper(batch: int, length: int, dim: int) -> Callable[[], None]:
    """The floor's step (see the module's docstring) on random tensors of the layer's sizes."""
    tiles = plan(batch, length, length, min(CPU_TILE_SCORES, memory_scores(batch, length, dim) // 2))
    q, k, v = (torch.randn(batch, length, dim) for _ in range(3))
    qa, ka, _ = augmented(q, k, dim**-0.5, 0.0)  # distances as the layer's: positive, its weights finite
    ka_t, da, va_t = ka.transpose(1, 2), torch.randn(batch, length, dim + 1), torch.randn(batch, dim + 1, length)
    out, dq, dk, dv = (torch.empty(batch, length, dim) for _ in range(4))
    memory = [torch.empty(tiles.per * tiles.rows * length) for _ in range(2)]
    keys_t, values, keys, values_t, dks, dvs = (tiles.groups(t) for t in (ka_t, v, k, va_t, dk, dv))
    views = list(zip(*(tiles.tiles(t) for t in (qa, da, out, dq))))

    def scores(qa_t: Tensor, g: int) -> Tensor:  # the tile's weights 2^(1/distance), its distances' memory in x
        x = memory[0][: qa_t.shape[0] * qa_t.shape[1] * length].view(qa_t.shape[0], qa_t.shape[1], length)
        torch.bmm(qa_t, keys_t[g], out=x)
        return torch.exp2(x.rsqrt_(), out=memory[1][: x.numel()].view(x.shape))

    def step() -> None:
        for i, (qa_t, _, out_t, _) in enumerate(views):
            torch.bmm(scores(qa_t, i // tiles.chunks), values[i // tiles.chunks], out=out_t)
        for i, (qa_t, da_t, _, dq_t) in enumerate(views):
            g = i // tiles.chunks
            e = scores(qa_t, g)
            dvs[g].baddbmm_(e.transpose(1, 2), da_t.narrow(-1, 0, dim))
            t = torch.bmm(da_t, values_t[g], out=memory[0][: e.numel()].view(e.shape))
            torch.bmm(t, keys[g], out=dq_t)
            dks[g].baddbmm_(t.transpose(1, 2), qa_t.narrow(-1, 0, dim))

    return step


def ratio(
    batch: int, length: int, dim: int, rounds: int, clock: str
) -> tuple[float, float, float, float, float | None]:
    """(euclid's median ratio to dot, lowest and highest round's, dot's ms a step, the floor's median ratio to dot
    where the call goes tile by tile, else None)."""
    steps = {name: stepper(name, batch, length, dim) for name in MIXERS}
    if batch * length * length > KEEP_SCORES:
        steps["floor"] = floor_stepper(batch, length, dim)
    count = max(1, round(2e6 / (batch * length * (length + 4 * dim))))  # ~0.2 s a round at a few ns a score
    interleaved(steps, max(1, count // 2))  # warm-up
    times = [interleaved(steps, count, clock) for _ in range(rounds)]
    ratios = sorted(t["euclid"] / t["dot"] for t in times)
    floor = statistics.median(t["floor"] / t["dot"] for t in times) if "floor" in steps else None
    return statistics.median(ratios), ratios[0], ratios[-1], statistics.median(t["dot"] for t in times) * 1e3, floor


def peak_mb(name: str, batch: int, length: int, dim: int) -> float:
    """The most tensor memory (MB) alive during two steps of a fresh layer over what was alive before it (see the
    module's docstring); in this process, after one small step of the same mixer (its one-time state)."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import MemoryProfileTimeline

    stepper(name, 2, 8, dim)()
    step = stepper(name, batch, length, dim)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        step()
        step()
    _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(torch.device("cpu"))
    totals = [sum(s) for s in sizes]
    return (max(totals) - totals[0]) / 2**20 if totals else 0.0


def peaks(batch: int, length: int, dim: int, threads: int) -> dict[str, float]:
    """Dot's and euclid's :func:`peak_mb`, dot then euclid, in a fresh process."""
    code = (
        "import json, sys, torch; sys.argv = ['x']; "
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); torch.set_num_threads({threads}); "
        "from bench_scaling import peak_mb; "
        f"print(json.dumps({{n: peak_mb(n, {batch}, {length}, {dim}) for n in ('dot', 'euclid')}}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def cpu() -> str:
    """The CPU model and the flags that matter to torch's kernels (lscpu, Linux), or what platform knows."""
    try:
        lines = dict(
            line.split(":", 1) for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
        )
    except (OSError, ValueError):
        return platform.processor() or platform.machine()
    flags = [f for f in lines.get("Flags", "").split() if f.startswith(("avx", "amx", "fma"))]
    caches = ", ".join(f"{k.strip()} {lines[k].strip()}" for k in ("L2 cache", "L3 cache") if k in lines)
    return f"{lines.get('Model name', '?').strip()}, {os.cpu_count()} CPUs, {caches}; flags {' '.join(flags)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512, 1024])
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--dims", type=int, nargs="+", default=[16, 64])
    parser.add_argument(
        "--threads", type=int, nargs="+", default=[1, 0], help="torch.set_num_threads; 0: torch's default"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clock", choices=["wall", "thread"], default="wall", help="thread: one thread's CPU time")
    parser.add_argument("--memory", choices=["on", "off"], default="on")
    parser.add_argument("--markdown", help="append the table to this Markdown file")
    args = parsed(parser, lengths=[300], batches=[16], dims=[16], threads=[1], rounds=1, markdown=None)
    default_threads = torch.get_num_threads()
    lines = [
        "| threads | head dim | batch | length | euclid / dot step (range) | floor / dot | dot ms "
        "| peak MB dot / euclid | memory ratio |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    for threads in args.threads:
        count = threads or default_threads
        torch.set_num_threads(count)
        clock = args.clock if count == 1 else "wall"
        for dim in args.dims:
            for batch in args.batches:
                for length in args.lengths:
                    mid, low, high, dot_ms, floor = ratio(batch, length, dim, args.rounds, clock)
                    memory = "| |"
                    if args.memory == "on":
                        mb = peaks(batch, length, dim, count)
                        memory = f"| {mb['dot']:.2f} / {mb['euclid']:.2f} | {mb['euclid'] / mb['dot']:.2f} |"
                    cell = f"| {count} | {dim} | {batch} | {length} |"
                    least = "" if floor is None else f"{floor:.2f}"
                    line = f"{cell} {mid:.2f} ({low:.2f}-{high:.2f}) | {least} | {dot_ms:.2f} {memory}"
                    lines.append(line)
                    print(line, flush=True)
    load = os.getloadavg()
    lines.append(
        f"\nbench_scaling: {args.rounds} rounds, {args.clock} clock; torch's default {default_threads} threads; "
        f"{cpu()}; torch {torch.__version__}, "
        f"Python {platform.python_version()}; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
        f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}"
    )
    print(lines[-1])
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
