"""The generated diagnostic tasks: shapes, determinism, answers right by construction, no input in two splits."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest
import torch
from scipy import stats as sp

from attnexp.data import ListOpsDataModule, MQARDataModule, RecallDataModule, SelectiveCopyDataModule, SeqOpsDataModule
from attnexp.data.listops import TOKENS
from attnexp.errors import AttnexpError
from attnexp.tokens import NO_TARGET

SIZES = {"train_size": 600, "val_size": 100, "test_size": 100}
MODULES = {
    "mqar": lambda **k: MQARDataModule(vocab=64, seq_len=32, num_pairs=6, **(SIZES | k)),
    "recall": lambda **k: RecallDataModule(vocab=8, seq_len=16, **(SIZES | k)),
    "selective_copy": lambda **k: SelectiveCopyDataModule(vocab=8, seq_len=20, num_tokens=5, **(SIZES | k)),
    "listops": lambda **k: ListOpsDataModule(max_depth=3, max_args=4, max_length=40, **(SIZES | k)),
    "listops_default": lambda **k: ListOpsDataModule(**(SIZES | k)),
    "seqops_sort": lambda **k: SeqOpsDataModule(
        op="sort", vocab=8, train_max_len=6, test_lengths=(3, 6, 9), **(SIZES | k)
    ),
    "seqops_reverse": lambda **k: SeqOpsDataModule(
        op="reverse", vocab=8, train_max_len=6, test_lengths=(3, 6, 9), **(SIZES | k)
    ),
}


def made(name: str, **kwargs):
    dm = MODULES[name](**kwargs)
    dm.setup()
    return dm


@pytest.mark.parametrize("name", MODULES)
def test_shapes_determinism_and_no_input_in_two_splits(name):
    dm = made(name)
    for split, size in (("train", 600), ("val", 100), ("test", 100)):
        x, y = dm.splits[split]
        assert x.shape == (size, dm.context) and x.dtype == torch.long
        assert y.shape == ((size,) if dm.num_classes else (size, dm.context))
        assert int(x.min()) >= 0 and int(x.max()) < dm.vocab_size
    again, other = made(name), made(name, split_seed=1)
    for split in ("train", "val", "test"):
        assert torch.equal(dm.splits[split][0], again.splits[split][0]) and torch.equal(
            dm.splits[split][1], again.splits[split][1]
        )
    assert not torch.equal(dm.splits["train"][0], other.splits["train"][0])
    inputs = {split: [tuple(row.tolist()) for row in dm.splits[split][0]] for split in ("train", "val", "test")}
    for split, rows in inputs.items():
        assert len(set(rows)) == len(rows), f"an input occurs twice in {split}"
    assert not set(inputs["train"]) & set(inputs["val"]) and not set(inputs["train"]) & set(inputs["test"])
    assert not set(inputs["val"]) & set(inputs["test"]), "an input is in both val and test"
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
            stack.append(
                {"[MAX": max(args), "[MIN": min(args), "[SM": sum(args) % 10, "[MED": args[(len(args) - 1) // 2]}[op]
            )
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


@pytest.mark.parametrize("name, op", [("seqops_sort", sorted), ("seqops_reverse", lambda s: s[::-1])])
def test_seqops_outputs_and_lengths(name, op):
    dm = made(name)
    for split in ("train", "test"):
        x, y = dm.splits[split]
        lengths = []
        for row, answers in scored(x, y):
            n = len(answers)
            lengths.append(n)
            assert (
                row[n] == 1
                and [t for _, t in answers] == op(row[:n])
                and [i for i, _ in answers] == list(range(n, 2 * n))
            )
            assert all(t == 0 for t in row[2 * n :])
        if split == "train":
            assert max(lengths) == 6 and min(lengths) == 1
        else:
            assert (
                sorted(set(lengths)) == [3, 6, 9]
                and max(lengths.count(n) for n in (3, 6, 9)) - min(lengths.count(n) for n in (3, 6, 9)) <= 1
            )


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: MQARDataModule(vocab=16, seq_len=32, num_pairs=9), "data.num_pairs=9"),
        (lambda: MQARDataModule(seq_len=20, num_pairs=8), "2 * 8 + 2 * 8 tokens"),
        (lambda: SeqOpsDataModule(op="shuffle"), "data.op='shuffle'"),
        (lambda: ListOpsDataModule(max_args=1), "at least 2 arguments"),
        (lambda: SelectiveCopyDataModule(seq_len=4, num_tokens=8), "data.num_tokens=8"),
    ],
)
def test_settings_that_cannot_work_are_explained(make, words):
    with pytest.raises(AttnexpError, match=r"[Ee]\.g\.") as err:
        make()
    assert words in str(err.value)


def test_a_split_too_large_for_the_input_space_is_explained():
    dm = SeqOpsDataModule(vocab=3, train_max_len=2, test_lengths=(1, 2), train_size=50, val_size=20, test_size=20)
    with pytest.raises(AttnexpError, match=r"data\.train_size \+ data\.val_size = 70 examples with distinct inputs"):
        dm.setup()


def length(row: list[int]) -> int:
    """Tokens before the padding (id 0) at the end; for the tasks padded with id 0."""
    return max((i + 1 for i, t in enumerate(row) if t != 0), default=0)


def depth(row: list[int]) -> int:
    level = deepest = 0
    for t in (TOKENS[i] for i in row if i):
        level += t.startswith("[") - (t == "]")
        deepest = max(deepest, level)
    return deepest


def same_distribution(counts: dict[str, list[int]]) -> float:
    """The chi-square test of homogeneity's p over splits (rows) and categories, sparse categories merged so that
    every expected count is at least 5."""
    table = np.array(list(counts.values()))
    merged, current = [], np.zeros(len(table), dtype=int)
    for column in table.T:
        current = current + column
        if current.sum() * min(table.sum(1)) / table.sum() >= 5:
            merged.append(current)
            current = np.zeros(len(table), dtype=int)
    if current.any():
        merged[-1] = merged[-1] + current
    return float(sp.chi2_contingency(np.array(merged).T).pvalue)


@pytest.mark.parametrize(
    "name, measure",
    [
        ("seqops_sort", lambda row: (length(row) + 1) // 2),
        ("listops", length),
        ("listops", depth),
        ("listops_default", length),
        ("listops_default", depth),
        ("mqar", length),
    ],
)
def test_every_split_has_the_same_length_and_depth_distribution(name, measure):
    # seqops' short test lengths have few inputs; ListOps at its defaults repeats short expressions often
    sizes = {"seqops_sort": (600, 200, 30), "listops_default": (4000, 1000, 1000)}.get(name, (1200, 400, 400))
    dm = made(name, train_size=sizes[0], val_size=sizes[1], test_size=sizes[2])
    splits = ["train", "val"] if name.startswith("seqops") else ["train", "val", "test"]  # seqops tests its own lengths
    values = {split: [measure(row) for row in dm.splits[split][0].tolist()] for split in splits}
    categories = sorted(set().union(*values.values()))
    counts = {split: [v.count(c) for c in categories] for split, v in values.items()}
    assert same_distribution(counts) > 0.01, counts
    if name == "seqops_sort":  # the shortest sequences (6 and 36 exist) are in val too, at the training share
        assert {1, 2} <= set(values["val"]) and abs(
            values["val"].count(1) / 200 - values["train"].count(1) / 600
        ) < 0.03


def position_guess(train, val) -> float:
    """The commonest training answer at the same position among sequences whose answers start at the same place."""
    counts: dict[tuple[int, int], Counter] = defaultdict(Counter)
    overall: Counter = Counter()
    for _, answers in scored(*train):
        for i, t in answers:
            counts[answers[0][0], i][t] += 1
            overall[t] += 1
    hits = [
        counts[a[0][0], i].most_common(1)[0][0] == t if counts[a[0][0], i] else t == overall.most_common(1)[0][0]
        for _, a in scored(*val)
        for i, t in a
    ]
    return sum(hits) / len(hits)


def context_guess(train, val) -> float:
    """A token of the answers' class seen so far, picked uniformly: its expected accuracy."""
    answer_class = {t for _, answers in scored(*train) for _, t in answers}
    expected = []
    for row, answers in scored(*val):
        for i, t in answers:
            seen = {token for token in row[: i + 1] if token in answer_class}
            expected.append(1 / len(seen) if t in seen else 0.0)
    return sum(expected) / len(expected)


@pytest.mark.parametrize("name", ["seqops_sort", "seqops_reverse", "mqar", "selective_copy", "recall"])
def test_chance_is_the_best_guess_that_does_not_solve_the_task(name):
    dm = made(name)
    train, val = dm.splits["train"], dm.splits["val"]
    assert dm.chance == pytest.approx(max(position_guess(train, val), context_guess(train, val)))
    if name == "seqops_sort":  # the answer's length and index say a lot about a sorted sequence's token
        assert dm.chance > 1.5 / (8 - 2)  # well above one of the 6 data tokens
    if name == "mqar":  # one of the 6 values in the context, not one of the 32 possible values
        assert dm.chance > 0.1 > 1 / 32


def test_listops_chance_is_the_best_majority_guess_by_length_and_operator():
    dm = made("listops")
    (tx, ty), (vx, vy) = dm.splits["train"], dm.splits["val"]
    keys = [lambda r: 0, length, lambda r: r[0], lambda r: (r[0], length(r))]
    best = 0.0
    for key in keys:
        counts: dict = defaultdict(Counter)
        for row, label in zip(tx.tolist(), ty.tolist()):
            counts[key(row)][label] += 1
        commonest = Counter(ty.tolist()).most_common(1)[0][0]
        hits = [
            (counts[key(r)].most_common(1)[0][0] if counts[key(r)] else commonest) == label
            for r, label in zip(vx.tolist(), vy.tolist())
        ]
        best = max(best, sum(hits) / len(hits))
    assert dm.chance == pytest.approx(best) and dm.chance > float(torch.bincount(ty, minlength=10).max()) / len(ty)
