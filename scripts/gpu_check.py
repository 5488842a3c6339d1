"""The GPU tier in one command: the GPU tests, then the attention and training-step benchmarks, in one Markdown report.

1. ``pytest -m gpu tests/gpu``: every mixer on every path on the GPU in float32 and bf16 against float64 on the
   CPU, with no host read (``torch.cuda.set_sync_debug_mode("error")``), euclid compiled by ``torch.compile`` against
   eager, euclid's Triton kernel (its unit-tier checks on CUDA, bf16 against float64, one inductor graph, memory
   O(L)), and a few ``trainer=gpu trainer.precision=bf16-mixed`` steps of every task family.
2. ``bench_attention``: each kernel's forward and forward+backward time and peak memory at L = 50, 1024, 4096 and
   8192, float32 and bf16 (euclid: its Triton kernel).
3. ``bench_step``: euclid over dot, a training step of the language model at L = 256 ... 8192 and of
   ``experiment=vit_book data=fashion_mnist`` (L = 50), bf16 autocast; the vit_book step also compiled
   (``module.compile=true``: euclid's kernel one operator of the graph).

The report names the GPU, torch, Triton, CUDA and the commit, and says whether euclid met its aims: forward+backward
at most 1.5x SDPA in bf16 from L = 1024, the language model's step at L = 4096 at most 1.5x dot's, a vit_book step at
most 1.3x dot's, and peak memory O(L) (forward+backward at L = 8192 at most 12x L = 1024's: 8x for O(L), 64x for
O(L^2)). At most ``--budget`` seconds (540 by default, so one 10-minute command holds it).

    PYTHONPATH=. python scripts/gpu_check.py --report gpu_check.md

``--vit-book`` instead runs the 30-epoch comparison of ``experiment=vit_book data=fashion_mnist``, dot against euclid,
3 seeds, as one sweep whose jobs share the GPU (:func:`vit_book`): within ``--budget`` seconds, stopped cleanly where
the budget ends, and continued by the same command later (``resume=true``: finished runs are skipped, the others go on
from their last finished epoch) where the run folders are kept (``--root``):

    ATTNEXP_DATA_DIR=shared/data PYTHONPATH=. python scripts/gpu_check.py --vit-book --budget 540 --report vit_book.md \
        --pack vit_book_runs.tar.gz
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
# euclid over dot: bf16 forward+backward from L = 1024, the language model's step at L = 4096, a vit_book step; peak
# memory of forward+backward at L = 8192 over L = 1024
AIMS = {"attention": 1.5, "lm": 1.5, "vit_book": 1.3, "memory": 12.0}


DEADLINE = [float("inf")]  # time.perf_counter() by which every step must have ended (--budget)


def run(command: list[str], report: Path, title: str, timeout: int) -> str:
    """Run a step of the check, append its output to the report under ``title``; return the output. A step gets at
    most ``timeout`` seconds, and none past the check's budget."""
    started = time.perf_counter()
    timeout = int(min(timeout, DEADLINE[0] - started))
    if timeout < 10:
        with report.open("a") as f:
            f.write(f"\n## {title}: not run (the check's --budget is spent)\n")
        return ""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
        output, status = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as stopped:
        output, status = f"{stopped.stdout or ''}\nstopped after {timeout} s", "timeout"
    took = time.perf_counter() - started
    with report.open("a") as f:
        f.write(f"\n## {title} (exit {status}, {took:.0f} s)\n\n    {' '.join(command)}\n\n")
        f.write(output if "|" in output else "```\n" + output[-6000:] + "\n```\n")
    print(f"{title}: exit {status} in {took:.0f} s", flush=True)
    return output


def header() -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    props = torch.cuda.get_device_properties(0)
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "missing (euclid runs its fixed-shape torch path)"
    return (
        f"# GPU check, {datetime.date.today()}\n\n"
        f"{torch.cuda.get_device_name(0)}, {props.total_memory / 2**30:.0f} GiB; "
        f"torch {torch.__version__}, Triton {triton_version}, CUDA {torch.version.cuda}; Python "
        f"{sys.version.split()[0]}; commit {commit or 'unknown'}\n"
    )


def ratios(output: str, column: int) -> dict[int, float]:
    """Euclid's ratio in ``column`` of each ``L=`` table of a benchmark's Markdown output."""
    found, length = {}, None
    for line in output.splitlines():
        if line.startswith("L="):
            length = int(line.split()[0][2:])
        elif line.startswith("| euclid |") and length is not None:
            found[length] = float(line.split("|")[column + 1])
    return found


def aims(attention_bf16: str, lm_steps: str, vit_steps: dict[str, str]) -> str:
    """Whether euclid met its aims, read from the benchmarks' tables."""
    lines = ["\n## Aims\n"]

    def verdict(label: str, value: float, aim: float, unit: str) -> None:
        lines.append(f"- {label}: {value:.2f}{unit} ({'met' if value <= aim else 'missed'}: at most {aim})")

    for length, ratio in ratios(attention_bf16, 4).items():  # forward+backward x sdpa
        if length >= 1024:
            verdict(f"euclid forward+backward, bf16, L={length}", ratio, AIMS["attention"], "x SDPA")
    peaks = ratios(attention_bf16, 6)  # peak forward+backward MB
    if 1024 in peaks and 8192 in peaks and peaks[1024] > 0:
        verdict("peak memory of forward+backward, bf16, L=8192 over L=1024", peaks[8192] / peaks[1024],
                AIMS["memory"], "x")  # fmt: skip
    for length, ratio in ratios(lm_steps, 2).items():  # x dot
        if length == 4096:
            verdict(f"language-model step, bf16, L={length}", ratio, AIMS["lm"], "x dot")
    for label, output in vit_steps.items():
        for length, ratio in ratios(output, 2).items():
            verdict(f"{label}, bf16, L={length}", ratio, AIMS["vit_book"], "x dot")
    return "\n".join(lines) + "\n"


VIT_BOOK = ["experiment=vit_book", "data=fashion_mnist", "data.download=false", "trainer=gpu"]


def vit_book_command(args: argparse.Namespace) -> list[str]:
    """The comparison's sweep: every mixer and seed of ``args`` as jobs sharing the GPU, resumed where it stopped."""
    return [
        sys.executable,
        "-m",
        "attnexp.cli.train",
        "--multirun",
        *VIT_BOOK,
        f"model={','.join(args.models)}",
        f"seed={','.join(map(str, args.seeds))}",
        f"trainer.precision={args.precision}",
        f"hydra.launcher.n_jobs={args.jobs or len(args.models) * len(args.seeds)}",
        f"paths.log_dir={args.root}",
        "resume=true",
        *args.overrides,
    ]


def run_until(command: list[str], seconds: float, grace: float = 90) -> tuple[int | None, float]:
    """Run ``command`` (a sweep) for at most ``seconds``; then ask it to stop (SIGTERM: its jobs stop at their next
    batch and end ``interrupted``) and give it ``grace`` seconds before killing it. Its exit status (None when killed)
    and the seconds it ran."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True)
    try:
        return proc.wait(timeout=max(1.0, seconds)), time.perf_counter() - started
    except subprocess.TimeoutExpired:
        print(f"vit_book: the budget is spent after {seconds:.0f} s: stopping the sweep", flush=True)
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=grace), time.perf_counter() - started
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the records stay "running": resume=true goes on from the last epoch
        proc.wait()
        return None, time.perf_counter() - started


def sweep_folder(root: Path) -> Path | None:
    """The newest sweep folder under ``root`` (the one the command made or resumed)."""
    found = sorted((root / "multirun").glob("*/*/multirun.yaml"), key=lambda p: p.stat().st_mtime)
    return found[-1].parent if found else None


def progress(folder: Path) -> list[str]:
    """A Markdown table of each job's status, epochs and test accuracy, from its metrics.json."""
    rows = ["| job | status | epochs | test/acc | fit s |", "|---|---|---|---|---|"]
    for path in sorted(folder.rglob("metrics.json")):
        record = json.loads(path.read_text())
        acc, fit = record.get("test/acc"), record.get("fit_s")
        rows.append(
            f"| {path.parent.relative_to(folder)} | {record.get('status')} | {record.get('epochs', '-')} | "
            f"{'-' if acc is None else f'{acc:.4f}'} | {'-' if fit is None else f'{fit:.0f}'} |"
        )
    return rows


def pack(folder: Path, archive: Path) -> None:
    """The sweep folder without its checkpoints (its records, logs, curves and summary) in one .tar.gz."""
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname=folder.name, filter=lambda info: None if info.name.endswith(".ckpt") else info)


def vit_book(args: argparse.Namespace) -> None:
    """The 30-epoch comparison within the budget; the jobs' progress and, once all are done, the sweep's summary
    (its verdict) in the report."""
    report = Path(args.report).resolve()
    command = vit_book_command(args)
    status, took = run_until(command, args.budget - args.grace - 15, args.grace)
    folder = sweep_folder(Path(args.root).resolve())
    lines = [
        header(),
        f"\n## vit_book, 30 epochs: exit {status} after {took:.0f} s\n",
        f"    {' '.join(command[2:])}\n",
    ]
    if folder is not None:
        lines += progress(folder)
        records = [json.loads(p.read_text()) for p in folder.rglob("metrics.json")]
        done = len(records) == len(args.models) * len(args.seeds) and all(r.get("status") == "ok" for r in records)
        summary = folder / "summary.md"
        finished = done and summary.exists()
        lines.append("\n" + summary.read_text() if finished else "\nNot finished: the same command goes on.")
        if args.pack:
            pack(folder, Path(args.pack).resolve())
    report.write_text("\n".join(lines) + "\n")
    print(f"report: {report}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--report", default="gpu_check.md")
    parser.add_argument("--skip", nargs="*", default=[], choices=["tests", "attention", "step"])
    parser.add_argument(
        "--budget", type=float, default=540, help="seconds for the whole check (steps past it are skipped)"
    )
    parser.add_argument("--vit-book", action="store_true", help="the 30-epoch comparison instead (see above)")
    parser.add_argument("--models", nargs="+", default=["dot", "euclid"], help="--vit-book: the mixers")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="--vit-book: the seeds")
    parser.add_argument("--jobs", type=int, help="--vit-book: jobs at once on the GPU (default: all of them)")
    parser.add_argument("--precision", default="bf16-mixed", help="--vit-book: Lightning's precision")
    parser.add_argument("--root", default="outputs", help="--vit-book: where the run folders go (and are resumed)")
    parser.add_argument("--grace", type=float, default=60, help="--vit-book: seconds for a clean stop")
    parser.add_argument("--pack", help="--vit-book: the sweep's records without checkpoints in this .tar.gz")
    parser.add_argument("overrides", nargs="*", help="--vit-book: more Hydra overrides for every run")
    args = parser.parse_args()
    DEADLINE[0] = time.perf_counter() + args.budget
    if not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device here (torch.cuda.is_available() is False); run it on a machine with a GPU.")
    if args.vit_book:
        return vit_book(args)
    report = Path(args.report).resolve()
    report.write_text(header())
    py = sys.executable
    if "tests" not in args.skip:
        run(
            [py, "-m", "pytest", "-q", "-m", "gpu", "tests/gpu", "-p", "no:cacheprovider"], report, "pytest -m gpu", 300
        )
    attention = {}
    if "attention" not in args.skip:
        for precision in ("32", "bf16"):
            attention[precision] = run(
                [
                    py,
                    "scripts/bench_attention.py",
                    "--lengths",
                    "50",
                    "1024",
                    "4096",
                    "8192",
                    "--only",
                    "euclid",
                    "--precision",
                    precision,
                    "--plot",
                    str(report.with_name(f"bench_attention_{precision}.png")),
                ],
                report,
                f"bench_attention, precision {precision}",
                70,
            )
    vit_steps, lm_steps = {}, ""
    if "step" not in args.skip:
        lm_steps = run(
            [
                py,
                "scripts/bench_step.py",
                "--net",
                "lm",
                "--tokens",
                "256",
                "1024",
                "4096",
                "8192",
                "--only",
                "euclid",
                "--precision",
                "bf16",
                "--rounds",
                "3",
                "--steps",
                "5",
            ],
            report,
            "bench_step, language model",
            90,
        )
        for label, extra in (("vit_book training step", []), ("vit_book training step, compiled", ["--compile"])):
            vit_steps[label] = run(
                [
                    py,
                    "scripts/bench_step.py",
                    "--net",
                    "vit_book",
                    "--only",
                    "euclid",
                    "--precision",
                    "bf16",
                    "--rounds",
                    "3",
                    "--steps",
                    "20",
                    *extra,
                ],
                report,
                f"bench_step, {label}",
                100 if extra else 40,
            )
    with report.open("a") as f:
        f.write(aims(attention.get("bf16", ""), lm_steps, vit_steps))
    print(f"report: {report}")


if __name__ == "__main__":
    main()
