"""Runs with the same seed see the same split and the same batch order whatever the variant: pairing by seed is
sound."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from helpers import model_factory, options

from attnexp.data import DigitsDataModule


def batches(seed: int, variant: str, epoch: int = 1) -> tuple[list[list[int]], torch.Tensor]:
    pl.seed_everything(seed, verbose=False)
    model_factory(variant)(dim=4, num_tokens=16)  # building the model draws random numbers first
    dm = DigitsDataModule(patch_size=2, val_size=180)
    dm.setup()
    sampler = dm.train_dataloader().sampler
    sampler.set_epoch(epoch)
    return [b.tolist() for b in sampler], dm.splits["val"][1]


def test_batch_order_depends_on_the_seed_only():
    orders = {variant: batches(3, variant) for variant in options("model")}
    first_order, first_val = next(iter(orders.values()))
    assert all(order == first_order and torch.equal(val, first_val) for order, val in orders.values())
    other_order, other_val = batches(4, "dot")
    assert other_order != first_order and torch.equal(other_val, first_val)  # another seed: new order, same split
    assert batches(3, "dot", epoch=2)[0] != first_order  # reshuffled every epoch
