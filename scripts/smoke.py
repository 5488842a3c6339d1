"""``--smoke``: a benchmark at its smallest, in seconds: that it runs as documented, not its numbers (the tests' user
tier runs every script of docs/benchmarks.md so)."""

from __future__ import annotations

import argparse

SMALL_RUN = ["trainer.limit_train_batches=2", "trainer.limit_val_batches=2", "trainer.limit_test_batches=2"]


def parsed(parser: argparse.ArgumentParser, **smallest: object) -> argparse.Namespace:
    """The script's arguments; with ``--smoke``, ``smallest`` in place of the given ones."""
    parser.add_argument("--smoke", action="store_true", help="the smallest run, in seconds: that the script works")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(smallest)
    return args
