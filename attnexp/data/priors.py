"""Chance measured on the data: the accuracy of the best guesser that uses only what a model sees without solving
the task (where the answer stands, how long the input is, which tokens can be answers), fitted on the training
split and scored on the validation split, as a model's ``val/acc`` is."""

from __future__ import annotations

import torch
from torch import Tensor


def majority(train_keys: Tensor, train_y: Tensor, keys: Tensor, y: Tensor) -> float:
    """Accuracy on (``keys``, ``y``) of guessing, for each key, the commonest training target with that key (the
    commonest target overall for a key training never had)."""
    classes = int(max(train_y.max(), y.max())) + 1
    table, ids = torch.unique(torch.cat([train_keys, keys]), dim=0, return_inverse=True)
    train_ids, ids = ids[: len(train_keys)], ids[len(train_keys) :]
    counts = torch.zeros(len(table), classes, dtype=torch.long).index_put_(
        (train_ids, train_y), torch.ones_like(train_y), accumulate=True
    )
    guess = counts.argmax(1)
    unseen = counts.sum(1) == 0
    guess[unseen] = int(torch.bincount(train_y, minlength=classes).argmax())
    return float((guess[ids] == y).float().mean())


def sequence_chance(train: tuple[Tensor, Tensor], val: tuple[Tensor, Tensor]) -> float:
    """Sequence classification: the best of the majority guess overall, by input length, by first token (a ListOps
    expression's outer operator) and by both."""

    def features(x: Tensor) -> Tensor:
        return torch.stack(
            [torch.zeros_like(x[:, 0]), (x != 0).sum(1), x[:, 0]], dim=1
        )  # (n, 3): nothing, length, first

    (tx, ty), (vx, vy) = train, val
    ft, fv = features(tx), features(vx)
    return max(majority(ft[:, cols], ty, fv[:, cols], vy) for cols in ([0], [1], [2], [1, 2]))


def answer_chance(train: tuple[Tensor, Tensor], val: tuple[Tensor, Tensor], unscored: int) -> float:
    """Next-token answers (targets ``unscored`` where nothing is scored), per answer token: the better of two guessers.

    By position: the commonest training answer at the same position of sequences whose first answer stands at the
    same place (for a sequence operation, its length and the answer's index). From the context: a token of the
    answers' class (the tokens training answers use) seen so far, chosen uniformly (expected accuracy)."""
    (tx, ty), (vx, vy) = train, val
    length = tx.shape[1]

    def keyed(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        scored = y != unscored
        first = scored.float().argmax(1, keepdim=True).expand_as(y)  # (n, L) where each row's first answer stands
        where = torch.arange(length).expand_as(y)
        return (first * length + where)[scored], y[scored]

    by_position = majority(*keyed(tx, ty), *keyed(vx, vy))
    vocab = int(max(tx.max(), vx.max(), ty.max(), vy.max())) + 1
    answers = torch.zeros(vocab, dtype=torch.bool)
    answers[ty[ty != unscored]] = True
    rows, at = (vy != unscored).nonzero(as_tuple=True)  # (answers,) each scored answer's row and position
    target = vy[rows, at]
    window = torch.arange(length) <= at.unsqueeze(1)  # (answers, L) the tokens a model has seen at the answer
    hit = ((vx[rows] == target.unsqueeze(1)) & window).any(1) & answers[target]
    candidates = distinct_so_far(vx, answers)[rows, at]
    from_context = float((hit / candidates.clamp(min=1)).mean())
    return max(by_position, from_context)


def distinct_so_far(x: Tensor, counted: Tensor) -> Tensor:
    """How many distinct tokens with ``counted[token]`` stand in each row of ``x`` up to each position.  # (n, L)"""
    order = x.argsort(dim=1, stable=True)  # equal tokens in order of position
    ordered = x.gather(1, order)
    first = torch.ones_like(x, dtype=torch.bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    first = torch.zeros_like(first).scatter_(1, order, first)  # (n, L) the token's first place in its row
    return (first & counted[x]).cumsum(1)
