"""Does ``threads``' default choose well? One epoch of a run with ``threads=1``, ``threads=2`` and the default, quiet
and beside one busy process, in one command.

Each run is ``python -m attnexp.cli.train <overrides> threads=...`` (what the ``attnexp`` command runs) in a fresh
process; its time is the fit (``fit_s`` of its metrics.json: training and validation, start-up left out) and the CPU
time the process used. "Busy" runs have a Python busy-loop beside them on one core, started before the run and
stopped after it (a browser or an editor beside a run on a laptop). The settings alternate within each round; the
medians over ``--rounds`` are reported with the ratios the rule is held to: beside the busy process the default within
1.5x of ``threads=1``, quiet within 1.05x of the best thread count. The threads the default chose are read from the
run's record.

    ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/bench_threads.py
    ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/bench_threads.py experiment=nanogpt_char \
        data.windows=3600 test=false
    ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/bench_threads.py --env OMP_WAIT_POLICY=PASSIVE

OpenMP's threads wait as its default says (spinning a while); ``--env OMP_WAIT_POLICY=PASSIVE`` measures sleeping
threads instead.

On a machine shared with other work, wall-clock figures measure the neighbours too: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from smoke import SMALL_RUN, parsed

DEFAULT = ["model=euclid", "data=mnist", "data.download=false", "trainer.max_epochs=1"]
SETTINGS = {"threads=1": ["threads=1"], "threads=2": ["threads=2"], "default": []}


def children_cpu() -> float:
    """CPU seconds (user and system) of this process's finished children."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def beside_busy(busy: bool) -> Iterator[None]:
    """A Python busy-loop running beside what the block starts (from half a second before), or nothing."""
    neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        time.sleep(0.5 if busy else 0)
        yield
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()


def one_run(overrides: list[str], folder: Path, busy: bool, env: dict[str, str]) -> dict[str, float]:
    """Fit seconds, the process's CPU seconds and the threads it trained with, of one CLI run."""
    with beside_busy(busy):
        cpu = children_cpu()
        proc = subprocess.run(
            [sys.executable, "-m", "attnexp.cli.train", *overrides, f"hydra.run.dir={folder}"],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
        )
        cpu = children_cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"the run failed (exit status {proc.returncode}):\n{proc.stderr[-2000:]}")
    record = json.loads((folder / "metrics.json").read_text())
    return {"fit": record["fit_s"], "cpu": cpu, "threads": record["device"]["threads"]}


def machine() -> str:
    """The CPU's model, the cores this process may use and torch's version."""
    import torch

    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        "unknown CPU",
    )
    return f"{model}, {len(os.sched_getaffinity(0))} cores, torch {torch.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(  # one a flag: a list would take the overrides after it as variables too
        "--env", action="append", default=[], metavar="KEY=VALUE", help="for every run, e.g. OMP_WAIT_POLICY=PASSIVE"
    )
    parser.add_argument("overrides", nargs="*", help=f"Hydra overrides (default: {' '.join(DEFAULT)})")
    args = parsed(parser, rounds=1)
    overrides = (args.overrides or DEFAULT) + (SMALL_RUN if args.smoke else [])
    env = dict(item.split("=", 1) for item in args.env)
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for place in ("quiet", "busy"):
                for name, extra in SETTINGS.items():
                    folder = Path(tmp) / f"{r}-{place}-{name.replace('=', '')}"
                    run = one_run([*overrides, *extra], folder, place == "busy", env)
                    runs.setdefault((place, name), []).append(run)
                    print(f"round {r} {place:5} {name:9} {runs[place, name][-1]}", flush=True)
    med = {key: {k: statistics.median(run[k] for run in found) for k in found[0]} for key, found in runs.items()}
    load = os.getloadavg()
    shown = " ".join([*args.env, "attnexp", *overrides])
    print(f"\nbench_threads: {shown}; medians of {args.rounds} rounds; {machine()}")
    print("\n| beside | threads | fit s | CPU s | threads used |\n|---|---|---|---|---|")
    for (place, name), m in med.items():
        print(f"| {place} | {name} | {m['fit']:.2f} | {m['cpu']:.2f} | {m['threads']:.0f} |")
    best = min(med["quiet", "threads=1"]["fit"], med["quiet", "threads=2"]["fit"])
    busy = med["busy", "default"]["fit"] / med["busy", "threads=1"]["fit"]
    quiet = med["quiet", "default"]["fit"] / best
    print(
        f"\nbeside a busy process: default / threads=1 = {busy:.2f} (aim: at most 1.5); "
        f"threads=2 / threads=1 = {med['busy', 'threads=2']['fit'] / med['busy', 'threads=1']['fit']:.2f}\n"
        f"quiet: default / best of threads=1 and 2 = {quiet:.2f} (aim: at most 1.05)\n"
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end (a shared machine's figures are not a "
        "quiet machine's)"
    )


if __name__ == "__main__":
    main()
