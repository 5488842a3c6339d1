"""The generated diagnostic tasks: shapes, determinism, answers right by construction, no input in two splits."""

from __future__ import annotations

import pytest
import torch

from attnexp.data import ListOpsDataModule, MQARDataModule, RecallDataModule, SelectiveCopyDataModule, SeqOpsDataModule
from attnexp.data.listops import TOKENS
from attnexp.data.synthetic import NO_TARGET
from attnexp.errors import AttnexpError

SIZES = {"train_size": 600, "val_size": 100, "test_size": 100}
MODULES = {
    "mqar": lambda **k: MQARDataModule(vocab=64, seq_len=32, num_pairs=6, **SIZES, **k),
    "recall": lambda **k: RecallDataModule(vocab=8, seq_len=16, **SIZES, **k),
    "selective_copy": lambda **k: SelectiveCopyDataModule(vocab=8, seq_len=20, num_tokens=5, **SIZES, **k),
    "listops": lambda **k: ListOpsDataModule(max_depth=3, max_args=4, max_length=40, **SIZES, **k),
    "seqops_sort": lambda **k: SeqOpsDataModule(op="sort", vocab=8, train_max_len=6, test_lengths=(3, 6, 9), **SIZES, **k),
    "seqops_reverse": lambda **k: SeqOpsDataModule(op="reverse", vocab=8, train_max_len=6, test_lengths=(3, 6, 9), **SIZES, **k),
}


def made(name: str, **kwargs):
    dm = MODULES[name](**kwargs)
    dm.setup()
    return dm


@pytest.mark.parametrize("name", MODULES)
def test_shapes_determinism_and_no_leakage(name):
    dm = made(name)
    for split, size in (("train", 600), ("val", 100), ("test", 100)):
        x, y = dm.splits[split]
        assert x.shape == (size, dm.context) and x.dtype == torch.long
        assert y.shape == ((size,) if dm.num_classes else (size, dm.context))
        assert int(x.min()) >= 0 and int(x.max()) < dm.vocab_size
    again, other = made(name), made(name, split_seed=1)
    for split in ("train", "val", "test"):
        assert torch.equal(dm.splits[split][0], again.splits[split][0]) and torch.equal(dm.splits[split][1], again.splits[split][1])
    assert not torch.equal(dm.splits["train"][0], other.splits["train"][0])
    train = {tuple(row.tolist()) for row in dm.splits["train"][0]}
    for split in ("val", "test"):
        assert not train & {tuple(row.tolist()) for row in dm.splits[split][0]}, f"a {split} input is also a training input"
    assert 0 < dm.chance < 1


def scored(x, y):
    """Each row's (position, input token, target) where a target is scored."""
    for row_x, row_y in zip(x.tolist(), y.tolist()):
        yield row_x, [(i, t) for i, t in enumerate(row_y) if t != NO_TARGET]


def test_mqar_answers_are_the_values_of_the_queried_keys():
    dm = made("mqar")
    x, y = dm.splits["train"]
    for row, answers in scored(x, y):
        pairs = dict(zip(row[0:12:2], row[1:12:2]))
        assert len(pairs) == 6 and all(1 <= k <= 31 for k in pairs) and all(v >= 32 for v in pairs.values())
        assert len(answers) == 6 and {row[i] for i, _ in answers} == set(pairs)  # every key asked once
        for i, target in answers:
            assert i >= 12 and target == pairs[row[i]] and row[i + 1] == target
        assert sum(t != 0 for t in row[12:]) == 12  # blanks elsewhere


def test_recall_answer_follows_the_earlier_occurrence():
    x, y = made("recall").splits["test"]
    for row, answers in scored(x, y):
        assert answers[0][0] == len(row) - 1 and len(answers) == 1
        earlier = [i for i, t in enumerate(row[:-1]) if t == row[-1]]
        assert len(earlier) == 1 and earlier[0] < len(row) - 2
        assert answers[0][1] == row[earlier[0] + 1]


def test_selective_copy_emits_the_data_tokens_in_order():
    x, y = made("selective_copy").splits["train"]
    for row, answers in scored(x, y):
        data = [t for t in row[:20] if t != 0]
        assert len(data) == 5 and row[20] == 1
        assert [t for _, t in answers] == data and [i for i, _ in answers] == list(range(20, 25))
        assert row[21:] == data[:-1]  # teacher forcing: the answers so far


def reference_listops(tokens: list[str]) -> int:
    """A stack evaluator, written apart from the generator's recursive one."""
    stack: list = []
    for token in tokens:
        if token == "]":
            args = []
            while not isinstance(stack[-1], str):
                args.append(stack.pop())
            op, args = stack.pop(), sorted(args)
            stack.append({"[MAX": max(args), "[MIN": min(args), "[SM": sum(args) % 10, "[MED": args[(len(args) - 1) // 2]}[op])
        elif token.isdigit():
            stack.append(int(token))
        else:
            stack.append(token)
    assert len(stack) == 1
    return stack[0]


def test_listops_labels_are_the_values_of_the_expressions():
    dm = made("listops")
    x, y = dm.splits["train"]
    depths = []
    for row, label in zip(x.tolist(), y.tolist()):
        tokens = [TOKENS[i] for i in row if i != 0]
        assert reference_listops(tokens) == label
        depth = max_depth = 0
        for t in tokens:
            depth += t.startswith("[") - (t == "]")
            max_depth = max(max_depth, depth)
        depths.append(max_depth)
    assert max(depths) <= 3 and min(depths) == 1 and len(set(depths)) > 1
    assert dm.chance == float(torch.bincount(y, minlength=10).max()) / len(y)


@pytest.mark.parametrize("name, op", [("seqops_sort", sorted), ("seqops_reverse", lambda s: s[::-1])])
def test_seqops_outputs_and_lengths(name, op):
    dm = made(name)
    for split in ("train", "test"):
        x, y = dm.splits[split]
        lengths = []
        for row, answers in scored(x, y):
            n = len(answers)
            lengths.append(n)
            assert row[n] == 1 and [t for _, t in answers] == op(row[:n]) and [i for i, _ in answers] == list(range(n, 2 * n))
            assert all(t == 0 for t in row[2 * n :])
        if split == "train":
            assert max(lengths) == 6 and min(lengths) == 1
        else:
            assert sorted(set(lengths)) == [3, 6, 9] and max(lengths.count(n) for n in (3, 6, 9)) - min(lengths.count(n) for n in (3, 6, 9)) <= 1


@pytest.mark.parametrize("make, words", [
    (lambda: MQARDataModule(vocab=16, seq_len=32, num_pairs=9), "data.num_pairs=9"),
    (lambda: MQARDataModule(seq_len=20, num_pairs=8), "2 * 8 + 2 * 8 tokens"),
    (lambda: SeqOpsDataModule(op="shuffle"), "data.op='shuffle'"),
    (lambda: ListOpsDataModule(max_args=1), "at least 2 arguments"),
    (lambda: SelectiveCopyDataModule(seq_len=4, num_tokens=8), "data.num_tokens=8"),
])
def test_settings_that_cannot_work_are_explained(make, words):
    with pytest.raises(AttnexpError, match=r"[Ee]\.g\.") as err:
        make()
    assert words in str(err.value)


def test_a_split_too_large_for_the_input_space_is_explained():
    dm = SeqOpsDataModule(vocab=3, train_max_len=2, test_lengths=(1, 2), train_size=50, val_size=20, test_size=20)
    with pytest.raises(AttnexpError, match="without repeating a training input"):
        dm.setup()
