"""Next-token prediction scored at answers only: loss, metrics, counts, the causal leak test and a short learning
run."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers import model_factory

from attnexp.data import MQARDataModule
from attnexp.networks import LanguageModel, SequenceClassifier
from attnexp.tasks import AnswerTokens
from attnexp.tokens import NO_TARGET


def example():
    logits = torch.randn(4, 6, 5)  # (B, L, V)
    target = torch.full((4, 6), NO_TARGET)
    target[:, 3:] = logits[:, 3:].argmax(-1)  # three answers per row, all right ...
    target[1, 5] = (target[1, 5] + 1) % 5  # ... but one in row 1
    target[2, :4] = NO_TARGET
    return logits, target


def test_loss_counts_and_metrics_cover_answers_only():
    logits, target = example()
    task = AnswerTokens(lengths=[2, 3])
    loss, out_logits, out_target = task.loss(logits, target)
    keep = target != NO_TARGET
    torch.testing.assert_close(loss, F.cross_entropy(logits[keep], target[keep]))
    assert int(task.count(target)) == int(keep.sum()) == 11
    metrics = task.metrics(5, "test")
    assert set(metrics) == {"acc", "seq_acc", "acc@len=2", "acc@len=3"} and set(task.metrics(5, "val")) == {
        "acc",
        "seq_acc",
    }
    for m in metrics.values():
        m.update(out_logits, out_target)
    values = {k: float(m.compute()) for k, m in metrics.items()}
    assert values["acc"] == pytest.approx(10 / 11) and values["seq_acc"] == pytest.approx(3 / 4)
    assert values["acc@len=2"] == pytest.approx(1.0) and values["acc@len=3"] == pytest.approx(8 / 9)


CAUSAL = ["dot", "euclid", "masked", "l2", "cosine"]


@pytest.mark.parametrize("variant", CAUSAL)
def test_no_causal_variant_sees_the_answers(variant):
    """Changing the answer tokens (the value after each queried key) leaves the logits at the queries unchanged."""
    torch.manual_seed(0)
    dm = MQARDataModule(vocab=32, seq_len=24, num_pairs=4, train_size=8, val_size=4, test_size=4)
    dm.setup()
    x, y = dm.splits["train"]
    net = LanguageModel(model_factory(variant, heads=2), **dm.spec, dim=16, depth=2, dropout=0.0).eval()
    with torch.no_grad():
        before = net(x)
    for row, i in (y != NO_TARGET).nonzero().tolist():
        changed = x.clone()
        changed[row, i + 1] = (x[row, i + 1] - 15) % 16 + 16  # another value token as this query's answer
        with torch.no_grad():
            after = net(changed)
        torch.testing.assert_close(after[row, : i + 1], before[row, : i + 1], rtol=1e-5, atol=1e-5)
        assert not torch.allclose(after[row, i + 1 :], before[row, i + 1 :])  # the change reached later positions


@pytest.mark.parametrize("variant, sees_padding", [("masked", False), ("dot", True)])
def test_sequence_classifier_pools_real_tokens_and_masked_never_sees_padding(variant, sees_padding):
    torch.manual_seed(0)
    net = SequenceClassifier(
        model_factory(variant, heads=2), vocab_size=8, context=5, num_classes=10, dim=16, depth=1
    ).eval()
    x = torch.tensor([[3, 4, 5, 0, 0]])
    with torch.no_grad():
        padded, unpadded = net(x), net(x[:, :3])
        token_there = net(torch.tensor([[3, 4, 5, 7, 0]]))
    assert not torch.allclose(padded, token_there)  # a real token is pooled
    assert (
        torch.allclose(padded, unpadded, atol=1e-5) != sees_padding
    )  # padding reaches the pool only through attention
