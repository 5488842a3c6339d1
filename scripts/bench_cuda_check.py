"""Cost of Lightning's NVML-based CUDA check on a machine without an NVIDIA driver.

Importing Lightning sets ``PYTORCH_NVML_BASED_CUDA_CHECK=1``; torch's Adam asks whether CUDA is
available at every step, and without a driver each NVML check tries to load libnvidia-ml again.
This times a plain training loop of the MNIST one-layer attention model (random data, batch 64)
with that check and with torch's own check (what ``attnexp.cli.hardware`` switches to), alternating
rounds in one process.

    PYTHONPATH=. python scripts/bench_cuda_check.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from functools import partial

import pytorch_lightning  # noqa: F401  (sets PYTORCH_NVML_BASED_CUDA_CHECK=1, as in every run)
import torch
import torch.nn.functional as F
from smoke import parsed

from attnexp.mixers import DotAttention
from attnexp.networks import PatchClassifier


def ms_per_step(steps: int) -> float:
    torch.manual_seed(0)
    net = PatchClassifier(partial(DotAttention, heads=1), image_size=28, channels=1, patch_size=7, num_classes=10)
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    x, y = torch.randn(steps * 64, 16, 49), torch.randint(0, 10, (steps * 64,))
    started = time.perf_counter()
    for idx in torch.randperm(len(x)).split(64):
        loss = F.cross_entropy(net(x[idx]), y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return (time.perf_counter() - started) / steps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parsed(parser, steps=10, rounds=1)
    torch.set_num_threads(args.threads)
    times: dict[str, list[float]] = {"1": [], "0": []}
    for _ in range(args.rounds):
        for value in times:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = value
            times[value].append(ms_per_step(args.steps))
    nvml, plain = statistics.median(times["1"]), statistics.median(times["0"])
    load = os.getloadavg()
    print(
        f"bench_cuda_check: {args.steps} steps x {args.rounds} rounds, {args.threads} thread(s), load {load[0]:.2f}; "
        f"CUDA available: {torch.cuda.is_available()}"
    )
    print(
        f"ms per step: NVML check {nvml:.3f}, torch's check {plain:.3f}: {nvml - plain:.3f} ms saved, "
        f"NVML/torch {nvml / plain:.2f}x"
    )


if __name__ == "__main__":
    main()
