"""The pieces of published training recipes: nanoGPT's (a warmup-cosine schedule, weight decay on matrices only,
tied embeddings, bias-free layers, text windows at random starts) and Zoology's (MQAR with power-law query gaps,
distinct values and blanks after the queries; no feed-forward layer; the head at the answers only)."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch

from attnexp.data import MQARDataModule, TextDataModule
from attnexp.data.synthetic import distinct
from attnexp.errors import AttnexpError
from attnexp.mixers import DotAttention
from attnexp.networks import LanguageModel
from attnexp.tasks import AnswerTokens, NextToken
from attnexp.tasks.answer_tokens import answer_slots
from attnexp.tokens import NO_TARGET
from attnexp.training.module import TaskModule
from attnexp.training.schedules import warmup_cosine


def gpt_lr(step: int, lr: float = 1e-3, warmup: int = 100, total: int = 2000, min_lr: float = 1e-4) -> float:
    """nanoGPT's get_lr, from its definition: linear warmup, cosine decay, then the minimum."""
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    if step > total:
        return min_lr
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / (total - warmup))) * (lr - min_lr)


def test_warmup_cosine_follows_gpt_training_step_by_step():
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    schedule = warmup_cosine(optimizer, warmup_steps=100, total_steps=2000, min_lr=1e-4)
    for step in range(2001):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(gpt_lr(step), rel=1e-9), step
        optimizer.step()
        schedule.step()
    with pytest.raises(AttnexpError, match="warmup_steps=2000 and total_steps=100"):
        warmup_cosine(optimizer, warmup_steps=2000, total_steps=100)


def gpt(**options) -> LanguageModel:
    torch.manual_seed(0)
    return LanguageModel(
        partial(DotAttention, heads=2, bias=False),
        vocab_size=11,
        context=8,
        dim=16,
        depth=2,
        dropout=0.0,
        positions="learned",
        **options,
    )


def test_tied_embeddings_and_no_biases():
    net = gpt(bias=False, tied_embeddings=True)
    assert net.head.weight is net.embed.weight
    assert not [name for name, _ in net.named_parameters() if "bias" in name]
    untied = gpt(bias=False)
    assert sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in net.parameters()) == 11 * 16
    logits = net(torch.randint(0, 11, (3, 8)))
    assert logits.shape == (3, 8, 11) and torch.isfinite(logits).all()


def test_no_feed_forward_layer():
    net = gpt(mlp_ratio=0.0)
    assert all(block.ff is None and block.norm2 is None for block in net.blocks)
    assert net(torch.randint(0, 11, (2, 8))).shape == (2, 8, 11)


def test_weight_decay_on_matrices_only():
    net = gpt(bias=False, tied_embeddings=True)
    module = TaskModule(
        net, NextToken(), optimizer=partial(torch.optim.AdamW, lr=1e-3, weight_decay=0.1), weight_decay_on="matrices"
    )
    decayed, kept = module.configure_optimizers().param_groups
    assert decayed["weight_decay"] == 0.1 and kept["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decayed["params"]) and all(p.dim() < 2 for p in kept["params"])
    assert len(decayed["params"]) + len(kept["params"]) == len(list(net.parameters()))  # the tied weight once
    everything = TaskModule(
        net, NextToken(), optimizer=partial(torch.optim.AdamW, weight_decay=0.1)
    ).configure_optimizers()
    assert len(everything.param_groups) == 1 and everything.param_groups[0]["weight_decay"] == 0.1
    with pytest.raises(AttnexpError, match=r"module\.weight_decay_on='vectors' is not allowed"):
        TaskModule(net, NextToken(), optimizer=torch.optim.AdamW, weight_decay_on="vectors")


def test_text_windows_at_random_starts(tmp_path):
    """An epoch is ``windows`` windows at random starts in the training part, drawn anew each epoch from the seed."""
    path = tmp_path / "text.txt"
    path.write_text("".join(chr(97 + i % 26) for i in range(2000)), encoding="utf-8")
    dm = TextDataModule(str(path), level="char", context=8, batch_size=5, windows=23)
    dm.setup()
    train = dm.streams["train"]

    def epoch(e: int, seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
        loader = dm.train_dataloader()
        loader.sampler.seed = seed
        loader.sampler.set_epoch(e)
        return list(loader)

    batches = epoch(0)
    assert [len(x) for x, _ in batches] == [5, 5, 5, 5, 3]
    for x, y in batches:
        torch.testing.assert_close(x[:, 1:], y[:, :-1])  # y is x one token later
        for row in x:  # every window is a slice of the training part
            starts = [i for i in range(len(train) - 8) if torch.equal(train[i : i + 8], row)]
            assert starts, row
    again, later, other = epoch(0), epoch(1), epoch(0, seed=1)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, again))
    assert not torch.equal(batches[0][0], later[0][0]) and not torch.equal(batches[0][0], other[0][0])


def zoology_mqar(**options) -> MQARDataModule:
    dm = MQARDataModule(
        vocab=512,
        seq_len=64,
        num_pairs=4,
        train_size=3000,
        val_size=100,
        test_size=100,
        power_a=0.01,
        distinct_values=True,
        answers_shown=False,
        **options,
    )
    dm.setup()
    return dm


def test_mqar_under_zoology_protocol():
    """Every key queried once, its value the target and a blank after it; values distinct; queries soon after the
    pairs."""
    x, y = zoology_mqar().splits["train"]
    n, p = len(x), 4
    keys, values = x[:, 0 : 2 * p : 2], x[:, 1 : 2 * p : 2]  # (n, P)
    assert all(len(set(row.tolist())) == p for row in values), "the values of a sequence differ"
    at = (y != NO_TARGET).nonzero()  # (n * P, 2): row, position of a query
    assert len(at) == n * p and (at[:, 1] >= 2 * p).all() and (at[:, 1] % 2 == 0).all()
    rows, where = at[:, 0], at[:, 1]
    asked = x[rows, where]  # the queried keys
    slot = (keys[rows] == asked.unsqueeze(1)).float().argmax(1)  # which pair each query asks for
    assert (keys[rows, slot] == asked).all() and (y[rows, where] == values[rows, slot]).all()
    assert (x[rows, where + 1] == 0).all(), "answers_shown=false leaves a blank after each query"
    gaps = (where - 2 * p) // 2  # 0 .. 27: uniform gaps average 13.5
    assert gaps.float().mean() < 8, "power_a=0.01 puts most queries soon after the pairs"
    first, last = where[slot == 0].float().mean(), where[slot == p - 1].float().mean()
    assert first < last, "the first pair takes the first gap drawn (likely a near one), as in Zoology's generator"
    uniform = MQARDataModule(vocab=512, seq_len=64, num_pairs=4, train_size=3000, val_size=100, test_size=100)
    uniform.setup()
    ux, uy = uniform.splits["train"]
    uat = (uy != NO_TARGET).nonzero()
    assert ((uat[:, 1] - 2 * p) // 2).float().mean() > 11, "power_a=1 spreads the queries uniformly"
    assert (ux[uat[:, 0], uat[:, 1] + 1] == uy[uat[:, 0], uat[:, 1]]).all(), "by default the value follows its query"


def test_mqar_rejects_bad_protocol_options():
    with pytest.raises(AttnexpError, match=r"data\.power_a=0"):
        MQARDataModule(power_a=0)
    with pytest.raises(AttnexpError, match=r"data\.distinct_values='yes'"):
        MQARDataModule(distinct_values="yes")


def test_distinct_over_a_large_range_in_blocks():
    """Blocks of rows keep a vocabulary of 8192 in memory; the draws are the same as one block's."""
    rows = distinct(5000, 8, 4096, 4096 + 8192, torch.Generator().manual_seed(1))
    assert rows.shape == (5000, 8) and rows.min() >= 4096 and rows.max() < 4096 + 8192
    assert all(len(set(r.tolist())) == 8 for r in rows)
    small = distinct(3, 4, 0, 10, torch.Generator().manual_seed(1))
    assert torch.equal(small, torch.rand(3, 10, generator=torch.Generator().manual_seed(1)).argsort(dim=1)[:, :4])


def test_head_at_the_answers_only_scores_as_the_full_head():
    """The answer task asks the language model for logits at the answer positions only: the loss and the
    metrics are those of the full (B, L, V) logits, for rows with different numbers of answers."""
    torch.manual_seed(0)
    net = LanguageModel(DotAttention, vocab_size=50, context=12, dim=16, depth=1, dropout=0.0).eval()
    x = torch.randint(0, 50, (5, 12))
    y = torch.full((5, 12), NO_TARGET)
    y[0, [3, 7]], y[1, 5], y[3, [1, 2, 11]] = 4, 9, 17  # rows with 2, 1, 0, 3 and 0 answers
    slots = answer_slots(y)
    assert slots.shape == (5, 3) and torch.equal(slots[3], torch.tensor([1, 2, 11])) and slots[0, :2].tolist() == [3, 7]
    task = AnswerTokens()
    with torch.no_grad():
        loss, logits, target = task.loss(task.forward(net, x, y), y)
        full = net(x)  # (B, L, V)
    assert logits.shape == (5, 3, 50) and target.shape == (5, 3)
    expected = torch.nn.functional.cross_entropy(full.reshape(-1, 50), y.reshape(-1), ignore_index=NO_TARGET)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    for name, metric in task.metrics(50, "test").items():
        reference = task.metrics(50, "test")[name]
        metric.update(logits, target), reference.update(full, y)
        assert metric.compute().item() == pytest.approx(reference.compute().item()), name
