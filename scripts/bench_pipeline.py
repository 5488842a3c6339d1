"""Training-pipeline benchmark: the runner vs the classic Dataset/DataLoader pipeline vs a plain loop.

A task's model and data five ways in one process:
(A) the runner: the real Hydra config, composed and passed to ``attnexp.cli.train.train``;
(B) classic: a per-item Dataset (a tensor from a float array and patch cutting in ``__getitem__``;
    for text, a window sliced from the token array), ``DataLoader(shuffle=True)`` at the task's
    batch size, a Lightning Trainer with default settings, and the module written the way the
    Lightning docs and templates write it: training loss and accuracy updated as torchmetrics
    and logged with ``self.log(..., on_epoch=True)`` at every step;
(Bd) B's data pipeline and default Trainer with the runner's module (metrics summed on the device,
    logged per epoch): how much of A/B is the data pipeline alone;
(C) a minimal hand-written PyTorch loop over the runner's pre-cut tensors;
(L) Lightning's own floor: A's module and data module in a Trainer without checkpoints, logger,
    progress bar, model summary or callbacks (what A/C cannot go below while Lightning runs the loop).
Each trains the same network from the same initial weights with the same optimizer (and schedule),
validates every epoch and tests at the end. Tasks (``--task``): ``mnist`` (the one-layer attention
model, ``model=dot data=mnist``, batch 64), ``vit`` (``experiment=vit_mnist``, batch 128) and ``lm``
(char-level next-token model on tinyshakespeare, context 128, batch 64). ``--repeats`` alternates
A, B, Bd, C, L and reports medians; ``--compile`` adds A with ``module.compile=true``: its compile time is
its fit time minus A's, and the median steps compare.

    ATTNEXP_DATA_DIR=/path/to/data python scripts/bench_pipeline.py --epochs 5
    ATTNEXP_DATA_DIR=/path/to/data python scripts/bench_pipeline.py --task vit --epochs 2 --steps 200 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, open_dict
from smoke import parsed
from torch.utils.data import DataLoader, Dataset
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from attnexp.cli.build import network as build_net
from attnexp.cli.hardware import plain_cuda_check_without_driver
from attnexp.cli.train import CONFIG_DIR, train
from attnexp.data import patchify
from attnexp.training.module import TaskModule

SEED = 0
TASKS = {
    "mnist": ["data=mnist", "model=dot", "data.download=false"],
    "vit": ["experiment=vit_mnist", "model=dot", "data.download=false"],
    "lm": [
        "data=text",
        "model=dot",
        "data.path=${paths.data_dir}/tinyshakespeare/input.txt",
        "data.level=char",
        "data.context=128",
    ],
}


def config(args: argparse.Namespace, compile: bool = False) -> DictConfig:
    """The task's runner config (Hydra's own keys included), as the CLI would compose it."""
    overrides = [
        *TASKS[args.task],
        f"paths.data_dir={args.data_dir}",
        f"seed={SEED}",
        f"trainer.max_epochs={args.epochs}",
        f"trainer.limit_train_batches={args.steps or 1.0}",
        "trainer.accelerator=cpu",
        f"module.compile={str(compile).lower()}",
        f"threads={args.threads}",  # A trains on the threads of the others, not on the thread rule's choice
        *args.overrides,
    ]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose("train", overrides=overrides, return_hydra_config=True)


def runner(args: argparse.Namespace, out: Path, compile: bool = False) -> dict[str, float]:
    """(A) the runner's path: compose the CLI's config and call ``attnexp.cli.train.train``."""
    cfg = config(args, compile)
    with open_dict(cfg):
        cfg.callbacks.step_timer = {"_target_": "__main__.StepTimer"}
        cfg.hydra.runtime.output_dir = str(out)
    HydraConfig.instance().set_config(cfg)
    started = time.perf_counter()
    train(cfg)
    wall = time.perf_counter() - started
    record = json.loads((out / "metrics.json").read_text())
    step_ms = statistics.median(StepTimer.last.times) * 1e3
    samples = round(record["train_samples_per_s"] * record["fit_s"])
    return {
        "seconds": record["fit_s"],
        "samples": samples,
        "test_acc": record["test/acc"],
        "wall_s": wall,
        "step_ms": step_ms,
    }


class StepTimer(pl.Callback):
    """Wall time per optimizer step of A (CPU work is synchronous, so no device sync is needed)."""

    last: StepTimer

    def __init__(self) -> None:
        self.times: list[float] = []
        StepTimer.last = self

    def on_train_batch_start(self, trainer: pl.Trainer, *args) -> None:
        self.started, self.first_step = time.perf_counter(), trainer.global_step

    def on_train_batch_end(self, trainer: pl.Trainer, *args) -> None:
        self.times.append((time.perf_counter() - self.started) / max(1, trainer.global_step - self.first_step))


class ImageItems(Dataset):
    """(B) per-item images: a tensor from a float array, then patches, one image at a time."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, patch_size: int | None) -> None:
        self.images, self.labels, self.patch_size = images, labels, patch_size  # (N, C, H, W) float32, (N,) int64

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        image = torch.tensor(self.images[i])  # (C, H, W)
        return (patchify(image[None], self.patch_size)[0] if self.patch_size else image), int(self.labels[i])


class WindowItems(Dataset):
    """(B) per-item text windows: ``context`` token ids and the next ones, sliced from an array."""

    def __init__(self, ids: np.ndarray, context: int, stride: int) -> None:
        self.ids, self.context, self.stride = ids, context, stride

    def __len__(self) -> int:
        return (len(self.ids) - self.context - 1) // self.stride + 1

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = i * self.stride
        return torch.tensor(self.ids[start : start + self.context]), torch.tensor(
            self.ids[start + 1 : start + self.context + 1]
        )


def classic_items(dm: pl.LightningDataModule, split: str) -> Dataset:
    """The split the classic way, from the arrays the runner's data module read."""
    if hasattr(dm, "streams"):  # text
        return WindowItems(
            dm.streams[split].numpy(), dm.context, (dm.stride or dm.context) if split == "train" else dm.context
        )
    x, y = dm.splits[split]
    return ImageItems(dm.as_images(x).numpy(), y.numpy(), dm.patch_size)


class PerStepLogging(TaskModule):
    """(B) the runner's module written the classic way: training metrics as torchmetrics updated and logged
    (``on_epoch=True``) at every training step, no divergence check."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.train_loss_metric, self.train_acc_metric = (
            MeanMetric(),
            MulticlassAccuracy(self.net.num_classes, average="micro"),
        )

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, logits, y = self._step(batch)
        self.train_loss_metric(loss)
        self.train_acc_metric(logits, y)
        self.log("train/loss", self.train_loss_metric, on_step=False, on_epoch=True, prog_bar=True)
        self.log("train/acc", self.train_acc_metric, on_step=False, on_epoch=True, prog_bar=True)
        return loss

    def on_train_batch_end(self, *args) -> None:
        pass

    def on_train_epoch_end(self) -> None:
        pass


def classic(
    args: argparse.Namespace, cfg: DictConfig, dm: pl.LightningDataModule, out: Path, per_step_logging: bool
) -> dict[str, float]:
    """(B, Bd) the classic data pipeline with a default Lightning Trainer."""
    module = instantiate(
        cfg.module,
        net=new_net(cfg, dm),
        task=instantiate(cfg.task),
        **({"_target_": f"{__name__}.PerStepLogging"} if per_step_logging else {}),
    )
    train_loader = DataLoader(classic_items(dm, "train"), batch_size=dm.batch_size, shuffle=True)
    val_loader, test_loader = (DataLoader(classic_items(dm, s), batch_size=dm.eval_batch_size) for s in ("val", "test"))
    trainer = pl.Trainer(
        max_epochs=args.epochs, limit_train_batches=args.steps or 1.0, accelerator="cpu", default_root_dir=str(out)
    )
    started = time.perf_counter()
    trainer.fit(module, train_loader, val_loader)
    seconds = time.perf_counter() - started
    acc = trainer.test(module, test_loader, verbose=False)[0]["test/acc"]
    samples = args.epochs * min(len(train_loader), args.steps or len(train_loader)) * dm.batch_size
    return {"seconds": seconds, "samples": samples, "test_acc": acc}


def bare(args: argparse.Namespace, cfg: DictConfig, dm: pl.LightningDataModule, out: Path) -> dict[str, float]:
    """(L) the runner's module and data module in a Trainer with every optional feature off."""
    module = instantiate(cfg.module, net=new_net(cfg, dm), task=instantiate(cfg.task))
    trainer = pl.Trainer(
        max_epochs=args.epochs,
        limit_train_batches=args.steps or 1.0,
        accelerator="cpu",
        default_root_dir=str(out),
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    started = time.perf_counter()
    trainer.fit(module, datamodule=dm)
    seconds = time.perf_counter() - started
    acc = trainer.test(module, datamodule=dm, verbose=False)[0]["test/acc"]
    samples = args.epochs * trainer.num_training_batches * dm.batch_size  # num_training_batches honours --steps
    return {"seconds": seconds, "samples": samples, "test_acc": acc}


def loop(args: argparse.Namespace, cfg: DictConfig, dm: pl.LightningDataModule) -> dict[str, float]:
    """(C) a minimal hand-written loop over the pre-cut tensors: train, validate each epoch, test."""
    net = new_net(cfg, dm)
    optimizer = instantiate(cfg.module.optimizer)(params=net.parameters())
    scheduler = instantiate(cfg.module.scheduler)(optimizer=optimizer) if cfg.module.get("scheduler") else None
    (x, y), (vx, vy), (tx, ty) = dm.splits["train"], dm.splits["val"], dm.splits["test"]

    def loss_and_logits(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = net(a).flatten(0, -2)  # tokens of a language model count one by one
        return F.cross_entropy(logits, b.flatten()), logits

    def accuracy(xs: torch.Tensor, ys: torch.Tensor) -> float:
        net.eval()
        with torch.no_grad():
            correct = sum(
                (loss_and_logits(a, b)[1].argmax(-1) == b.flatten()).sum()
                for a, b in zip(xs.split(dm.eval_batch_size), ys.split(dm.eval_batch_size))
            )
        net.train()
        return float(correct) / ys.numel()

    samples, started = 0, time.perf_counter()
    for _ in range(args.epochs):
        for step, idx in enumerate(torch.randperm(len(x)).split(dm.batch_size)):
            if args.steps and step == args.steps:
                break
            loss = loss_and_logits(x[idx], y[idx])[0]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            samples += len(idx)
        accuracy(vx, vy)
        if scheduler is not None:
            scheduler.step()
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "samples": samples, "test_acc": accuracy(tx, ty)}


def new_net(cfg: DictConfig, dm: pl.LightningDataModule) -> torch.nn.Module:
    """The runner's network for this config, seeded like the runner seeds it."""
    pl.seed_everything(SEED, verbose=False)
    return build_net(cfg.net, dm.spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="mnist")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=0, help="training steps per epoch (0 = the whole epoch)")
    parser.add_argument(
        "--repeats", type=int, default=1, help="alternate the pipelines this many times; report medians"
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch.set_num_threads for every pipeline (1: the machine is shared)"
    )
    parser.add_argument("--compile", action="store_true", help="also run A with module.compile=true")
    parser.add_argument(
        "overrides", nargs="*", help="extra Hydra overrides for A, e.g. callbacks.progress_bar.refresh_rate=0"
    )
    parser.add_argument("--data-dir", default=os.environ.get("ATTNEXP_DATA_DIR", "data"))
    args = parsed(parser, epochs=1, steps=2, repeats=1, compile=False)
    torch.set_num_threads(args.threads)
    args.cheap_cuda_check = plain_cuda_check_without_driver()  # what the runner does, here for all three
    cfg = config(args)
    dm = instantiate(cfg.data)
    dm.setup()
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            runs = {
                "A runner": lambda o: runner(args, o),
                "B classic": lambda o: classic(args, cfg, dm, o, per_step_logging=True),
                "Bd data": lambda o: classic(args, cfg, dm, o, per_step_logging=False),
                "C loop": lambda o: loop(args, cfg, dm),
                "L bare": lambda o: bare(args, cfg, dm, o),
            }
            if args.compile:
                runs["A compile"] = lambda o: runner(args, o, compile=True)
            for name, run in runs.items():
                out = Path(tmp) / f"{name.replace(' ', '_')}{r}"
                out.mkdir()
                results.setdefault(name, []).append(run(out))
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in results.items()}
    for m in med.values():
        m["samples_per_s"] = m["samples"] / m["seconds"]  # of the median time
    report(args, med)


def report(args: argparse.Namespace, med: dict[str, dict[str, float]]) -> None:
    load = os.getloadavg()
    print(
        f"\nbench_pipeline: task {args.task} ({' '.join(TASKS[args.task][:2])}), "
        f"{args.epochs} epochs x {args.steps or 'all'} steps, "
        f"{args.threads} threads, median of {args.repeats}; load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs; "
        f"NVML CUDA check {'undone (no driver)' if args.cheap_cuda_check else 'as found'}"
    )
    print(f"{'pipeline':<12}{'samples/s':>11}{'seconds':>9}{'test acc':>10}")
    for name, m in med.items():
        print(f"{name:<12}{m['samples_per_s']:>11.0f}{m['seconds']:>9.1f}{m['test_acc']:>10.4f}")
    a, b, bd, c, floor = med["A runner"], med["B classic"], med["Bd data"], med["C loop"], med["L bare"]
    print(
        f"A/B throughput {a['samples_per_s'] / b['samples_per_s']:.2f}x "
        f"(target >= 3; A/Bd {a['samples_per_s'] / bd['samples_per_s']:.2f}x, "
        f"C/B {c['samples_per_s'] / b['samples_per_s']:.2f}x)   "
        f"A/C time {a['seconds'] / c['seconds']:.2f}x (target <= 1.30)   "
        f"A total wall incl. data, test, figures {a['wall_s']:.1f} s"
    )
    print(
        f"Lightning's floor: L/C time {floor['seconds'] / c['seconds']:.2f}x; "
        f"A/L {a['seconds'] / floor['seconds']:.2f}x (the runner's callbacks, logger, checkpoints)"
    )
    if "A compile" in med:
        m = med["A compile"]
        print(
            f"A compile: fit {m['seconds']:.1f} s = {m['seconds'] / a['seconds']:.2f}x A: "
            f"{m['seconds'] - a['seconds']:.1f} s of compiling "
            "(train, eval and recompiled shapes); median training step "
            f"{m['step_ms']:.2f} ms compiled vs {a['step_ms']:.2f} ms eager"
        )


if __name__ == "__main__":
    main()
