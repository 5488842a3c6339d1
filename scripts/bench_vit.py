"""Training throughput of a ViT on CPU: our tensor pipeline vs a torchvision Dataset + DataLoader.

Both feed the same model (same seed, same batch size) through the same Lightning
training step on random images written in CIFAR-10's batch format: ours loads
them once into a tensor and augments whole batches (``data=cifar10``); the
baseline is torchvision's ``CIFAR10`` with per-sample PIL transforms (random
crop with padding 4, horizontal flip, to tensor, normalise). The two are
measured in alternation for ``--rounds`` rounds; the table gives the median
images/s of the data alone and of whole training steps, and their ratio to
the baseline.

    python scripts/bench_vit.py [--rounds 3] [--steps 20] [--batch-size 128] [--dim 64] [--workers 0]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
import warnings
from functools import partial
from pathlib import Path

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader
from torchvision import transforms

from attnexp.data import BatchAugment, CIFAR10DataModule
from attnexp.data.cifar10 import CIFAR10FilesOnly
from attnexp.mixers import DotAttention
from attnexp.networks import VisionTransformer
from attnexp.tasks import ImageClassification
from attnexp.training.module import TaskModule

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cifar10_files import random_cifar10
from smoke import parsed


class Throughput(pl.Callback):
    """Images per second over the training batches after ``warmup``."""

    def __init__(self, warmup: int) -> None:
        self.warmup, self.images, self.started = warmup, 0, 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if batch_idx == self.warmup:
            self.started = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if batch_idx >= self.warmup:
            self.images += len(batch[0])

    @property
    def per_second(self) -> float:
        return self.images / (time.perf_counter() - self.started)


def images_per_second(args: argparse.Namespace, **fit_inputs) -> float:
    """Train a fresh ViT for ``args.steps`` steps on ``fit_inputs``; return images/s after warm-up."""
    pl.seed_everything(0, verbose=False)
    net = VisionTransformer(partial(DotAttention, heads=4), 32, 3, None, 10, patch=4, dim=args.dim, depth=args.depth)
    module = TaskModule(net, ImageClassification(), partial(torch.optim.Adam, lr=1e-3))
    meter = Throughput(warmup=args.warmup)
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=args.warmup + args.steps,
        limit_val_batches=0,
        logger=False,
        callbacks=[meter],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, **fit_inputs)
    return meter.per_second


def data_per_second(batches, augment=None, count: int = 20) -> float:
    """Images/s of drawing ``count`` batches (and augmenting them, for our pipeline) without a model."""
    started, images = time.perf_counter(), 0
    for i, (x, _) in enumerate(batches):
        if i == count:
            break
        images += len(augment(x) if augment else x)
    return images / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating measurements of both pipelines")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per pipeline and round")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader workers of the baseline")
    parser.add_argument("--images", type=int, default=10000, help="training images written")
    args = parsed(parser, rounds=1, steps=2, warmup=1, images=256, batch_size=32)
    warnings.filterwarnings("ignore")
    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)

    with tempfile.TemporaryDirectory() as root:
        random_cifar10(root, n_train=args.images, n_test=100)
        ours = CIFAR10DataModule(
            root=root,
            download=False,
            verify_checksums=False,
            val_size=1,  # the one image held out of a split both pipelines otherwise train on whole
            batch_size=args.batch_size,
            augment=BatchAugment(crop_padding=4, flip=True),
        )
        baseline_set = CIFAR10FilesOnly(
            root,
            train=True,
            transform=transforms.Compose(
                [
                    transforms.RandomCrop(32, padding=4),
                    transforms.RandomHorizontalFlip(),
                    transforms.ToTensor(),
                    transforms.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25)),
                ]
            ),
        )
        baseline = DataLoader(
            baseline_set,
            batch_size=args.batch_size,
            shuffle=True,
            num_workers=args.workers,
            drop_last=True,
            persistent_workers=args.workers > 0,
        )
        ours.setup()
        names = [
            "torchvision Dataset + DataLoader, per-sample transforms",
            "attnexp tensor pipeline, whole-batch augmentation",
        ]
        data, steps = {n: [] for n in names}, {n: [] for n in names}
        for _ in range(args.rounds):
            data[names[0]].append(data_per_second(baseline))
            data[names[1]].append(data_per_second(ours.train_dataloader(), ours.augment))
            steps[names[0]].append(images_per_second(args, train_dataloaders=baseline))
            steps[names[1]].append(images_per_second(args, datamodule=ours))
    data, steps = ({n: statistics.median(v) for n, v in d.items()} for d in (data, steps))
    print(
        f"\nViT dim {args.dim}, depth {args.depth}, patch 4 (65 tokens), batch {args.batch_size}, "
        f"{torch.get_num_threads()} threads, baseline workers {args.workers}, median of {args.rounds} rounds "
        f"({args.steps} timed steps each)"
    )
    print("| pipeline | data only, images/s | ratio | training, images/s | ratio |\n|---|---:|---:|---:|---:|")
    for name in names:
        print(
            f"| {name} | {data[name]:,.0f} | {data[name] / data[names[0]]:.2f} "
            f"| {steps[name]:,.0f} | {steps[name] / steps[names[0]]:.2f} |"
        )


if __name__ == "__main__":
    main()
