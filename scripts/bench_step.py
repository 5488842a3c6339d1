"""Training-step benchmark: one optimizer step of a network, per attention variant, against dot's.

``--net patch`` (default, CPU): the model of ``net=patch`` (one attention layer, ReLU, linear head) on batches of 64
random patch tokens: L=16 tokens of 49 values (MNIST's 7x7 patches) and L=64 tokens of 16 (32x32 images cut into 4x4
patches), one head. ``--net lm``: the causal language model of ``net=lm`` (dim 256, 4 heads, 4 layers, no dropout,
vocabulary 256) at any ``--tokens``, batches of ``--batch-tokens`` tokens. ``--net vit_book``: the network of
``experiment=vit_book data=fashion_mnist`` (ViT, dim 512, 8 heads, 6 layers, 50 tokens), batch 32. A step is forward,
cross-entropy, backward and a fused Adam step, no Lightning; ``--precision bf16`` runs forward and loss under bf16
autocast, as ``trainer.precision=bf16-mixed`` does. Variants take turns step by step; a round's time is a variant's
median step in that round, and the ratio is the median over rounds of the variant's time over dot's in the same
round. ``--clock thread`` times each step by the calling thread's CPU time (``time.thread_time``) instead of wall
time: with one torch thread all of a CPU step's work runs in that thread, and the time a shared machine gives to
other processes is left out (there wall-clock ratios spread over 1.5-3.2). ``euclid`` runs its default path
(``model.path=auto``: on a CPU the rows function of ``ops/rows.py``, on a GPU the Triton kernel), ``euclid
explicit`` the formula through autograd (the path used when the weights are asked for). On a GPU each step ends with a
synchronisation, so a step's time is the GPU's.

    PYTHONPATH=. python scripts/bench_step.py
    PYTHONPATH=. python scripts/bench_step.py --device cuda --net lm --tokens 256 1024 4096 8192 \
      --precision bf16 --only euclid
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch
from smoke import parsed
from torch import nn

from attnexp.mixers import CosineAttention, DotAttention, EuclidAttention, L2Attention, SqueezeExcitation
from attnexp.networks import LanguageModel, PatchClassifier

SHAPES = {16: (28, 7), 64: (32, 4)}  # patch net: tokens -> (image size, patch size)
VARIANTS: dict[str, tuple[Callable[..., nn.Module], dict]] = {
    "dot": (DotAttention, {}),
    "euclid": (EuclidAttention, {}),
    "euclid explicit": (EuclidAttention, {"path": "explicit"}),
    "masked": (DotAttention, {"causal": True}),
    "l2": (L2Attention, {}),
    "cosine": (CosineAttention, {}),
    "se": (SqueezeExcitation, {}),
}
ATTENTION = {"dot", "euclid", "euclid explicit", "masked", "l2", "cosine"}  # variants with heads


def mixer(name: str, heads: int) -> Callable[..., nn.Module]:
    cls, options = VARIANTS[name]
    return partial(cls, **options, **({"heads": heads} if name in ATTENTION else {}))


def network(
    net: str, name: str, tokens: int
) -> tuple[nn.Module, Callable[[int, torch.device], tuple[torch.Tensor, torch.Tensor]]]:
    """A fresh seeded network with the variant ``name`` and a function making a (inputs, targets) batch for it."""
    torch.manual_seed(0)
    if net == "patch":
        image, patch = SHAPES[tokens]
        model = PatchClassifier(mixer(name, 1), image_size=image, channels=1, patch_size=patch, num_classes=10)
        return model, lambda batch, device: (
            torch.randn(batch, tokens, patch * patch, device=device),
            torch.randint(0, 10, (batch,), device=device),
        )
    if net == "lm":
        model = LanguageModel(mixer(name, 4), vocab_size=256, context=tokens, dim=256, depth=4, dropout=0.0)
        return model, lambda batch, device: (
            torch.randint(0, 256, (batch, tokens), device=device),
            torch.randint(0, 256, (batch, tokens), device=device),
        )
    return vit_book(name), lambda batch, device: (
        torch.randn(batch, 1, 28, 28, device=device),
        torch.randint(0, 10, (batch,), device=device),
    )


def vit_book(name: str) -> nn.Module:
    """The network of ``experiment=vit_book data=fashion_mnist model=<name>``, as a run composes and builds it."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from attnexp.cli.build import network as build_net
    from attnexp.cli.train import CONFIG_DIR

    model = {"euclid explicit": ["model=euclid", "model.path=explicit"]}.get(name, [f"model={name}"])
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        cfg = compose("train", overrides=["experiment=vit_book", "data=fashion_mnist", *model])
    return build_net(cfg.net, instantiate(cfg.data).spec)


def stepper(
    net: str, name: str, tokens: int, batch: int, device: torch.device, precision: str, compile: bool = False
) -> Callable[[], None]:
    """A closure that makes one training step of a fresh seeded network on a fixed batch (``compile``: the network
    through ``torch.compile``, as ``module.compile=true`` runs it)."""
    model, make_batch = network(net, name, tokens)
    model = model.to(device)
    forward = torch.compile(model) if compile else model
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)
    x, y = make_batch(batch, device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")

    def step() -> None:
        with autocast:
            logits = forward(x)
            loss = nn.functional.cross_entropy(logits.flatten(0, -2), y.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()

    return step


CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}


def interleaved(steps: dict[str, Callable[[], None]], count: int, clock: str = "wall") -> dict[str, float]:
    """Median seconds per step of each variant over ``count`` steps each, the variants taking turns step by step
    (so a slow spell of a shared machine hits them all), by ``clock`` (a key of :data:`CLOCKS`)."""
    now = CLOCKS[clock]
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(count):
        for name, step in steps.items():
            started = now()
            step()
            times[name].append(now() - started)
    return {name: statistics.median(ts) for name, ts in times.items()}


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    return f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, torch {torch.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--net", choices=["patch", "lm", "vit_book"], default="patch")
    parser.add_argument("--tokens", type=int, nargs="+", help="sequence lengths (patch: 16, 64; vit_book: 50)")
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), help="variants besides dot (default: all)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--steps", type=int, default=200, help="timed steps per variant and round (after 30 warm-up steps)"
    )
    parser.add_argument("--batch", type=int, default=None, help="batch size (patch: 64, vit_book: 32)")
    parser.add_argument("--batch-tokens", type=int, default=16384, help="lm: tokens per batch (batch = this / L)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--precision", choices=["32", "bf16"], default="32")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1: the machine is shared)")
    parser.add_argument(
        "--clock",
        choices=list(CLOCKS),
        default="wall",
        help="wall time, or the thread's CPU time (one thread on a CPU: a shared machine's other work left out)",
    )
    parser.add_argument("--compile", action="store_true", help="torch.compile the networks (on a CPU it builds C++)")
    parser.add_argument("--markdown", help="append the tables to this Markdown file")
    args = parsed(parser, rounds=1, only=["euclid"], markdown=None)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.clock == "thread" and (device.type != "cpu" or args.threads != 1):
        parser.error("--clock thread times a CPU step on one thread: use it with --device cpu --threads 1")
    lengths = args.tokens or {"patch": list(SHAPES), "lm": [256, 1024], "vit_book": [50]}[args.net]
    names = ["dot", *[n for n in VARIANTS if n != "dot" and (not args.only or n in args.only)]]
    if args.net != "patch":
        names = [n for n in names if n != "se"]  # causal (lm) or too wide (vit) for se's one gate per channel
    compiled = ", compiled" if args.compile else ""
    out = [f"\n### bench_step: net={args.net}, precision {args.precision}{compiled}, {machine(device)}\n"]
    for tokens in lengths:
        batch = args.batch or {"patch": 64, "vit_book": 32}.get(args.net) or max(1, args.batch_tokens // tokens)
        steps = {name: stepper(args.net, name, tokens, batch, device, args.precision, args.compile) for name in names}
        interleaved(steps, 30 if device.type == "cpu" else 5)  # warm-up
        rounds = [interleaved(steps, args.steps, args.clock) for _ in range(args.rounds)]
        out.append(f"\nL={tokens} batch={batch}\n\n| variant | ms/step | x dot | range |\n|---|---|---|---|")
        for name in names:
            ms = statistics.median(r[name] for r in rounds) * 1e3
            ratios = sorted(r[name] / r["dot"] for r in rounds)
            out.append(f"| {name} | {ms:.3f} | {statistics.median(ratios):.2f} | {ratios[0]:.2f}-{ratios[-1]:.2f} |")
    load = os.getloadavg()
    out.append(
        f"\nbench_step: {args.rounds} rounds x {args.steps} steps, {args.threads} thread(s), {args.clock} clock; "
        f"load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; torch {torch.__version__}"
    )
    text = "\n".join(out)
    print(text)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
