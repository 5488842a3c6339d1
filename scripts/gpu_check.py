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
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--report", default="gpu_check.md")
    parser.add_argument("--skip", nargs="*", default=[], choices=["tests", "attention", "step"])
    parser.add_argument(
        "--budget", type=float, default=540, help="seconds for the whole check (steps past it are skipped)"
    )
    args = parser.parse_args()
    DEADLINE[0] = time.perf_counter() + args.budget
    if not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device here (torch.cuda.is_available() is False); run it on a machine with a GPU.")
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
