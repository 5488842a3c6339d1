"""What an accuracy counts, said by its task from the data (``scored`` in the record): the tokens of next-token
windows, the answer tokens and sequences of a recall task, the target tokens of sequence pairs, the images of a
classifier. Each count is checked against what the task's own metric counted over the split."""

from __future__ import annotations

import torch

from attnexp.data import CorpusDataModule, DatesDataModule, DigitsDataModule, MQARDataModule
from attnexp.tasks import AnswerTokens, ImageClassification, NextToken, Seq2SeqTask


def counted(task, split: tuple[torch.Tensor, torch.Tensor], classes: int) -> dict[str, int]:
    """The predictions each of the task's test metrics counts when given the whole split (random logits)."""
    y = split[1]
    width = y.shape[1] - 1 if isinstance(task, Seq2SeqTask) else None  # teacher forcing predicts after [bos]
    shape = (*y.shape[:1], width, classes) if width else (*y.shape, classes)
    _, logits, target = task.loss(torch.randn(shape), y)
    metrics = task.metrics(classes, "test")
    found = {}
    for name, metric in metrics.items():
        if name in ("acc", "seq_acc") or name.startswith("acc@"):
            metric.update(logits, target)
            state = metric.metric_state
            found[name] = int(state["total"]) if "total" in state else int(state["tp"].sum() + state["fn"].sum())
    return found


def test_next_token_accuracy_counts_tokens_not_windows():
    dm = CorpusDataModule()
    dm.setup()
    scored = NextToken().scored(dm.splits)["test"]
    windows, context = dm.splits["test"][1].shape
    assert scored == {"acc": windows * context} == counted(NextToken(), dm.splits["test"], len(dm.vocab))
    assert scored["acc"] == 56 and windows == 7  # the toy corpus: 7 windows of 8 tokens


def test_recall_counts_answer_tokens_and_sequences_and_sequence_pairs_their_target_tokens():
    dm = MQARDataModule(seq_len=32, num_pairs=4, train_size=64, val_size=32, test_size=32)
    dm.setup()
    task = AnswerTokens(lengths=[4, 2])
    scored = task.scored(dm.splits)["test"]
    assert scored == counted(task, dm.splits["test"], dm.vocab_size) and scored["seq_acc"] == 32
    assert scored["acc"] == int((dm.splits["test"][1] >= 0).sum()) and scored["acc@len=2"] == 0
    pairs = DatesDataModule(train_size=64, val_size=32, test_size=32)
    pairs.setup()
    seq2seq = Seq2SeqTask().scored(pairs.splits)["test"]
    assert (
        seq2seq["exact"] == 32
        and seq2seq["acc"] == counted(Seq2SeqTask(), pairs.splits["test"], len(pairs.tgt_vocab))["acc"]
    )


def test_a_classifier_counts_its_images():
    dm = DigitsDataModule(val_size=180)
    dm.setup()
    scored = ImageClassification().scored(dm.splits)
    assert scored["test"] == {"acc": 360} == counted(ImageClassification(), dm.splits["test"], 10)
