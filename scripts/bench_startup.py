"""Where the wall time of one short CLI run goes: starting up, the run itself (data, fit, test, figures), exiting.

Runs ``python -m attnexp.cli.train <overrides>`` (what the ``attnexp`` command runs) as a fresh process
``--repeats`` times and splits each run's wall time with the run folder's own record: metrics.json
holds ``wall_s`` (the run, from building its callbacks to the test's end) and ``fit_s`` (fit alone),
and its last write marks the run's end (what follows: the TensorBoard hparams, Hydra's job end, the
process exit). Reports medians and the share of the wall time spent in fit. The runs get
``--threads`` torch threads (OMP_NUM_THREADS, 1 by default as in the other benchmarks).

    ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/bench_startup.py
    ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/bench_startup.py --repeats 5 model=euclid
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from smoke import SMALL_RUN, parsed

DEFAULT = ["data=mnist", "data.download=false", "trainer.max_epochs=1"]


def one_run(overrides: list[str], folder: Path, threads: int) -> dict[str, float]:
    """Seconds of one CLI run: total, before the run, the run (and its fit), after its record."""
    started = time.time()
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run(
        [sys.executable, "-m", "attnexp.cli.train", *overrides, f"hydra.run.dir={folder}"],
        capture_output=True,
        text=True,
        env=env,
    )
    total = time.time() - started
    if proc.returncode != 0:
        raise SystemExit(f"the run failed (exit status {proc.returncode}):\n{proc.stderr[-2000:]}")
    metrics = folder / "metrics.json"
    record, ended = json.loads(metrics.read_text()), metrics.stat().st_mtime
    run_start = ended - record["wall_s"]
    return {
        "total": total,
        "start": run_start - started,
        "run": record["wall_s"],
        "fit": record["fit_s"],
        "end": started + total - ended,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each run (1: the machine is shared)")
    parser.add_argument("overrides", nargs="*", help=f"Hydra overrides (default: {' '.join(DEFAULT)})")
    args = parsed(parser, repeats=1)
    overrides = (args.overrides or DEFAULT) + (SMALL_RUN if args.smoke else [])
    with tempfile.TemporaryDirectory() as tmp:
        runs = [one_run(overrides, Path(tmp) / f"run{i}", args.threads) for i in range(args.repeats)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    load = os.getloadavg()[0]
    print(
        f"bench_startup: attnexp {' '.join(overrides)}, median of {args.repeats} fresh processes, {args.threads} "
        f"threads; load average {load:.2f} on {os.cpu_count()} CPUs"
    )
    print(
        f"total {med['total']:.2f} s = start (imports, config) {med['start']:.2f} s + run {med['run']:.2f} s "
        f"+ end {med['end']:.2f} s"
    )
    print(
        f"run {med['run']:.2f} s = fit {med['fit']:.2f} s + data, test, figures {med['run'] - med['fit']:.2f} s; "
        f"fit is {med['fit'] / med['total']:.0%} of the total"
    )


if __name__ == "__main__":
    main()
