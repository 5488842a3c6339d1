"""The ``attnexp-compare`` entrypoint: summarize run or sweep folders without retraining (see
:mod:`attnexp.comparison`)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from attnexp.cli import command
from attnexp.comparison import files, margins
from attnexp.comparison.naming import find_runs
from attnexp.comparison.render import markdown
from attnexp.comparison.runs import left_out_notes
from attnexp.comparison.summary import DEFAULT_TUNE, compare
from attnexp.errors import shortened
from attnexp.runs import tracker_comparison

DESCRIPTION = """Compare the runs under run or sweep folders without training again: per metric every seed, the mean
with its 95% interval, and the difference from a baseline with a p-value and a verdict; printed, and written as
summary.md, summary.csv, runs.csv, summary.tex and plots; one table per task and data set. Runs stopped by bad
input, or that trained or validated nothing, are left out with a note; runs that did not finish are listed with their
status."""
EXAMPLES = """examples:
  attnexp-compare outputs/multirun/<date>/<a> outputs/multirun/<date>/<b> --out cmp   two sweeps together
  attnexp-compare outputs/runs --baseline model=euclid --columns attn/layer0/entropy  every single run
  attnexp-compare <dot's sweep> <euclid's sweep> --ignore trainer.max_epochs   runs whose epochs were matched per seed

exit status: 0 when every run compared finished, 1 when some did not, 2 for a missing folder, nothing comparable
(records that are damaged or of an earlier attnexp are named and left out), a bad --baseline, or an --out folder
holding other files (or a file)."""


def main(argv: Sequence[str] | None = None) -> int:
    """``attnexp-compare FOLDER...``: the comparison of every run under the folders, printed and written as files."""
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser("attnexp-compare", description=DESCRIPTION, epilog=EXAMPLES, formatter_class=raw)
    parser.add_argument("folders", nargs="+", help="run folders or sweep folders (searched recursively)")
    parser.add_argument("--out", help="where to write the summary (default: ./comparison/<date>_<time>)")
    parser.add_argument("--baseline", help="the configuration compared with (default: model=dot, else the first)")
    parser.add_argument(
        "--tune", nargs="*", default=list(DEFAULT_TUNE), help=f"keys tuned per configuration: {DEFAULT_TUNE}"
    )
    parser.add_argument("--columns", nargs="*", default=[], help="more metrics.json keys to compare")
    margin_help = "±VALUE of METRIC counts as equivalent (default: an accuracy's standard error; 1%% of a loss)"
    parser.add_argument("--margin", nargs="*", default=[], metavar="METRIC=VALUE", help=margin_help)
    ignore_help = "overrides that name no configuration (e.g. trainer.max_epochs matched per seed)"
    parser.add_argument("--ignore", nargs="*", default=[], metavar="KEY", help=ignore_help)
    trackers_help = "also write the comparison to the MLflow and W&B runs the records name (a parent run or group)"
    parser.add_argument("--trackers", action="store_true", help=trackers_help)
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else Path("comparison") / time.strftime("%Y-%m-%d_%H-%M-%S")
    try:
        margin = margins.given(args.margin)
        missing = [f for f in args.folders if not os.path.isdir(f)]  # False for a name too long to look up
        if missing:
            raise ValueError(f"no such folder: {', '.join(missing)}. Give run or sweep folders (under outputs/).")
        runs = find_runs(args.folders, args.ignore)
        if not any(r.comparable for r in runs):
            notes = " ".join(left_out_notes(runs))
            raise ValueError(f"no runs to compare (folders with metrics.json) under {', '.join(args.folders)}. {notes}")
        files.ours_or_empty(out)
        result = compare(runs, args.baseline, args.tune, args.columns, margin, args.ignore)
        written = files.write_all(result, out)
    except (ValueError, files.OverwriteError) as err:  # bad input: one paragraph, nothing written
        command.refuse(f"attnexp-compare: {shortened(str(err))}")
        return 2
    command.note_result(result)
    shown = tracker_comparison.compared(result, written, out) if args.trackers else []
    print(markdown(result) + f"\nWrote {', '.join(files.OUTPUTS)} and plots into {out}")
    for line in shown:
        print(f"In the tracker: {line}")
    return 1 if any(r.status != "ok" for r in result.rows) else 0  # left-out runs are not rows


def cli() -> None:
    """Console script ``attnexp-compare``."""
    with command.held("attnexp-compare"):
        status = main()
    sys.exit(status)


if __name__ == "__main__":
    cli()
