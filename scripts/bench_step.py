"""Training-step benchmark: one optimizer step of the patch model, per attention variant, against dot's.

The model of ``net=patch`` (one attention layer, ReLU, linear head) on batches of 64 random patch
tokens: L=16 tokens of 49 values (MNIST's 7x7 patches) and L=64 tokens of 16 (32x32 images cut
into 4x4 patches). A step is forward, cross-entropy, backward and a fused Adam step, no Lightning.
Variants take turns step by step; a round's time is a variant's median step in that round, and the
ratio is the median over rounds of the variant's time over dot's in the same round. ``euclid`` runs its default
path (``model.path=auto``: the fused autograd function on a CPU), ``euclid explicit`` the formula through autograd
(``model.path=explicit``, the path used when the weights are asked for).

    PYTHONPATH=. python scripts/bench_step.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch
from torch import nn

from attnexp.mixers import CosineAttention, DotAttention, EuclidAttention, L2Attention, SqueezeExcitation
from attnexp.networks import PatchClassifier

SHAPES = {16: (28, 7), 64: (32, 4)}  # tokens -> (image size, patch size)


MIXERS: dict[str, Callable[..., nn.Module]] = {
    "dot": partial(DotAttention, heads=1),
    "euclid": partial(EuclidAttention, heads=1),
    "euclid explicit": partial(EuclidAttention, heads=1, path="explicit"),
    "masked": partial(DotAttention, heads=1, causal=True),
    "l2": partial(L2Attention, heads=1),
    "cosine": partial(CosineAttention, heads=1),
    "se": SqueezeExcitation,
}


def stepper(mixer: Callable[..., nn.Module], tokens: int, batch: int) -> Callable[[], None]:
    """A closure that makes one training step of a fresh seeded model on a fixed batch."""
    image, patch = SHAPES[tokens]
    torch.manual_seed(0)
    net = PatchClassifier(mixer, image_size=image, channels=1, patch_size=patch, num_classes=10)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3, fused=True)
    x, y = torch.randn(batch, tokens, patch * patch), torch.randint(0, 10, (batch,))

    def step() -> None:
        loss = nn.functional.cross_entropy(net(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def interleaved(steps: dict[str, Callable[[], None]], count: int) -> dict[str, float]:
    """Median seconds per step of each variant over ``count`` steps each, the variants taking turns step by step
    (so a slow spell of a shared machine hits them all)."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(count):
        for name, step in steps.items():
            started = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--only", nargs="+", choices=list(MIXERS), help="variants besides dot (default: all)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200, help="timed steps per variant and round (after 30 warm-up steps)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1: the machine is shared)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    names = ["dot", *[n for n in MIXERS if n != "dot" and (not args.only or n in args.only)]]
    for tokens in args.tokens:
        steps = {name: stepper(MIXERS[name], tokens, args.batch) for name in names}
        interleaved(steps, 30)  # warm-up
        rounds = [interleaved(steps, args.steps) for _ in range(args.rounds)]
        print(f"\nL={tokens} D={SHAPES[tokens][1] ** 2}\n{'variant':<17}{'ms/step':>9}{'x dot':>8}{'range':>14}")
        for name in names:
            ms = statistics.median(r[name] for r in rounds) * 1e3
            ratios = sorted(r[name] / r["dot"] for r in rounds)
            print(f"{name:<17}{ms:>9.3f}{statistics.median(ratios):>8.2f}{f'{ratios[0]:.2f}-{ratios[-1]:.2f}':>14}")
    load = os.getloadavg()
    print(f"\nbench_step: batch {args.batch}, {args.threads} thread(s), {args.rounds} rounds x {args.steps} steps; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; torch {torch.__version__}")


if __name__ == "__main__":
    main()
