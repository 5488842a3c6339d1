"""Training data lives where the model trains: the split is copied to the trainer's device once and every batch is
sliced there (no copy from the host at each step); evaluation batches still come from the host, and on a CPU nothing
changes. ``meta`` stands in for a GPU: a tensor there has a device but no values."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from attnexp.data import DigitsDataModule, TextDataModule

META = torch.device("meta")


def on(device: torch.device):
    """A stand-in trainer on ``device`` (what a data module asks of its trainer)."""
    return SimpleNamespace(strategy=SimpleNamespace(root_device=device))


def test_image_training_batches_are_sliced_on_the_trainers_device():
    data = DigitsDataModule(patch_size=2, batch_size=64, val_size=100)
    data.setup("fit")
    data.trainer = on(META)
    loader = data.train_dataloader()
    assert loader.dataset.x.device == META and loader.dataset.y.device == META  # copied once, with the loader
    batches = list(loader)
    assert all(x.device == META and y.device == META for x, y in batches)
    assert [len(x) for x, _ in batches] == [64] * 20 + [57] and batches[0][0].shape[1:] == (16, 4)
    assert next(iter(data.val_dataloader()))[0].device.type == "cpu"  # figures and telemetry read these


def test_text_windows_are_cut_on_the_trainers_device(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    data = TextDataModule(path=str(text), level="char", context=16, batch_size=8, windows=40)
    data.setup("fit")
    data.trainer = on(META)
    batches = list(data.train_dataloader())
    assert [tuple(x.shape) for x, _ in batches] == [(8, 16)] * 5
    assert all(x.device == META and y.device == META for x, y in batches)


def test_on_the_cpu_the_batches_are_those_drawn_without_a_trainer():
    """A CPU trainer's batches are the host's, in the same order: the order is drawn on the CPU for every device."""
    data = DigitsDataModule(patch_size=2, batch_size=64, val_size=100)
    data.setup("fit")
    alone = list(data.train_dataloader())
    data.trainer = on(torch.device("cpu"))
    for (x, y), (x0, y0) in zip(data.train_dataloader(), alone, strict=True):
        assert torch.equal(x, x0) and torch.equal(y, y0)
