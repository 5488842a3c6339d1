"""Whole training runs through Lightning (the slow tier): what a model learns, what a training call reads on the
host, the training statistics and the telemetry's effect on training."""

from __future__ import annotations

import math
from functools import partial

import pytest
import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from helpers import causal_mixers, model_factory, quiet_trainer

from attnexp.data import CorpusDataModule, DigitsDataModule, RecallDataModule
from attnexp.data.vocabulary import Vocabulary
from attnexp.mixers import DotAttention
from attnexp.networks import LanguageModel, PatchClassifier
from attnexp.networks.language_model import next_token_probs
from attnexp.tasks import AnswerTokens, ImageClassification, NextToken
from attnexp.tokens import NO_TARGET
from attnexp.training.callbacks.telemetry import AttentionTelemetry
from attnexp.training.module import TaskModule


def test_training_calls_never_read_a_tensor_on_the_host(monkeypatch, tmp_path):
    """From the start to the end of each Lightning call (several forward, backward and fused optimizer steps)."""

    def forbidden(*args, **kwargs):
        raise AssertionError("host sync in a training call")

    class Forbid(pl.Callback):
        def on_train_batch_start(self, *args):
            for name in ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__"):
                monkeypatch.setattr(torch.Tensor, name, forbidden)

        def on_train_batch_end(self, *args):
            monkeypatch.undo()

    torch.manual_seed(0)
    net = PatchClassifier(partial(DotAttention, heads=1), image_size=8, channels=1, patch_size=2, num_classes=10)
    m = TaskModule(
        net,
        ImageClassification(),
        optimizer=partial(torch.optim.Adam, lr=1e-3, fused=True),
        divergence_check_every=1000,
    )
    trainer = quiet_trainer(
        accelerator="auto",
        max_epochs=1,
        callbacks=[Forbid()],
        default_root_dir=tmp_path,
    )
    trainer.fit(m, datamodule=DigitsDataModule(patch_size=2, val_size=180))
    assert trainer.global_step == 20 and m.train_count == 1257
    assert 0 < float(trainer.callback_metrics["train/loss"]) < 2.5


def test_training_statistics_count_answers_only():
    """train/acc and train/loss average over answers: the module's sums use the task's count."""
    torch.manual_seed(0)
    dm = RecallDataModule(vocab=6, seq_len=8, train_size=64, val_size=16, test_size=16, batch_size=16)
    net = LanguageModel(model_factory("dot", heads=1), **dm.spec, dim=8, depth=1, dropout=0.0)
    module = TaskModule(net, AnswerTokens(), optimizer=lambda params: torch.optim.SGD(params, lr=0.0))
    trainer = quiet_trainer(
        max_epochs=1,
        limit_val_batches=0,
    )
    trainer.fit(module, datamodule=dm)
    x, y = dm.splits["train"]
    with torch.no_grad():
        logits = net.eval()(x)
    keep = y != NO_TARGET
    assert module.train_count == 64  # one answer per sequence
    torch.testing.assert_close(
        trainer.callback_metrics["train/loss"], F.cross_entropy(logits[keep], y[keep]), rtol=1e-5, atol=1e-6
    )
    torch.testing.assert_close(
        trainer.callback_metrics["train/acc"], (logits.argmax(-1)[keep] == y[keep]).float().mean()
    )


def test_dot_learns_recall():
    """Two layers of dot attention find the earlier occurrence of the query token and copy what followed it."""
    pl.seed_everything(0, verbose=False)
    dm = RecallDataModule(vocab=8, seq_len=12, train_size=4000, val_size=200, test_size=200, batch_size=64)
    net = LanguageModel(model_factory("dot", heads=2), **dm.spec, dim=32, depth=2, dropout=0.0)
    module = TaskModule(net, AnswerTokens(), optimizer=lambda params: torch.optim.Adam(params, lr=3e-3))
    trainer = quiet_trainer(
        max_epochs=8,
    )
    trainer.fit(module, datamodule=dm)
    trainer.test(module, datamodule=dm, verbose=False)
    acc = float(trainer.callback_metrics["test/acc"])
    print(f"recall test/acc {acc:.3f}")
    assert acc > 0.8, f"test/acc {acc:.3f}; chance is {dm.chance:.3f}"
    assert math.isclose(acc, float(trainer.callback_metrics["test/seq_acc"]))  # one answer per sequence


def train_toy(variant: str) -> tuple[LanguageModel, Vocabulary, float]:
    """Seeded short training on the toy corpus; returns the net, the vocabulary and the last train loss."""
    pl.seed_everything(0, verbose=False)
    dm = CorpusDataModule(context=8, repeats=20)
    net = LanguageModel(model_factory(variant), **dm.spec)
    module = TaskModule(net, NextToken(), optimizer=partial(torch.optim.Adam, lr=3e-3))
    trainer = quiet_trainer(
        max_epochs=5,
        limit_val_batches=0,
    )
    trainer.fit(module, datamodule=dm)
    return net.eval(), dm.vocab, float(trainer.callback_metrics["train/loss"])


@pytest.mark.parametrize("variant", causal_mixers())
def test_toy_corpus_is_learnt(variant):
    net, vocab, loss = train_toy(variant)
    first = vocab.tokens[next_token_probs(net, vocab.encode(["[bos]"])[0]).argmax()]
    after_dog = vocab.tokens[next_token_probs(net, vocab.encode(["[bos]", "el", "perro"])[0]).argmax()]
    assert first in {"el", "un"}, first
    assert after_dog == "come", after_dog
    assert loss < math.log(len(vocab)) / 2, loss


def test_telemetry_is_logged_and_leaves_training_as_it_was():
    def fit(callbacks):
        pl.seed_everything(0, verbose=False)
        dm = CorpusDataModule(context=8, repeats=4)
        net = LanguageModel(
            partial(DotAttention, heads=2), **dm.spec, dim=16, dropout=0.1
        )  # dropout draws random numbers
        trainer = quiet_trainer(
            max_epochs=2,
            callbacks=callbacks,
        )
        trainer.fit(TaskModule(net, NextToken(), optimizer=partial(torch.optim.Adam, lr=3e-3)), datamodule=dm)
        return {k: float(v) for k, v in trainer.callback_metrics.items()}

    with_telemetry, without = fit([AttentionTelemetry()]), fit([])
    assert {"attn/layer0/entropy", "attn/layer1/max_weight", "attn/layer1/self_weight"} <= with_telemetry.keys()
    assert 0 < with_telemetry["attn/layer0/entropy"] < 1 and with_telemetry["attn/layer0/nonfinite"] == 0
    assert with_telemetry["train/loss"] == without["train/loss"] and with_telemetry["val/loss"] == without["val/loss"]
