"""A mixer's training cost beside dot's at one size: forward and backward time and memory, measured side by side in
one process (alternating rounds, medians), as ratios to dot, and the machine they were measured on. The rounds are
bounded: fewer once the ratio is decided, and none started past a time cap (a slow mixer's ratio is then coarse)."""

from __future__ import annotations

import platform
import statistics
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
from torch import Tensor, nn

from attnexp.mixers.contract import make_mixer
from attnexp.mixers.dot import DotAttention
from attnexp.mixers.request import MixerRequest

MIN_MEASURE_S = 0.02  # each measure repeats the step until it lasts about this long
SLOW_STEP_S = 0.2  # a warm-up step slower than this is measured once a round, with no calibration step
ROUNDS = 15  # alternating rounds, at most
CAP_S = 10.0  # no round starts that would end later than this after the measurement began (one round always runs)
MIN_DECIDED = 6  # the fewest rounds whose median ratio has a 95% interval
DECIDED = 0.05  # the ratio is decided once its median's 95% interval lies within this share of it
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile")  # the instruction sets CPU kernels choose between


@dataclass(frozen=True)
class Cost:
    """One mixer's forward and backward step: the median seconds, and the memory it takes (bytes)."""

    seconds: float
    memory: int


@dataclass(frozen=True)
class Speed:
    """A mixer's :class:`Cost` beside dot's at the same size, on ``device``, over ``rounds`` alternating rounds;
    ``ended`` says why they stopped: ``"all"`` (as many as asked), ``"decided"`` (the ratio settled) or ``"capped"``
    (the time cap, ``cap_s`` seconds, came first: a coarse ratio)."""

    mixer: Cost
    dot: Cost
    rounds: int
    device: torch.device
    ended: str = "all"
    cap_s: float = CAP_S

    @property
    def memory_measure(self) -> str:
        return "peak memory allocated" if self.device.type == "cuda" else "memory saved for backward"

    def describe(self) -> str:
        time_ratio, memory_ratio = self.mixer.seconds / self.dot.seconds, self.mixer.memory / max(self.dot.memory, 1)
        return (
            f"{time_ratio:.2f}x dot's time ({duration(self.mixer.seconds)} against "
            f"{duration(self.dot.seconds)}, "
            f"{self.how_measured()}), {memory_ratio:.2f}x dot's {self.memory_measure} "
            f"({megabytes(self.mixer.memory)} against {megabytes(self.dot.memory)})"
        )

    def how_measured(self) -> str:
        rounds = f"{self.rounds} alternating round{'s' * (self.rounds != 1)}"
        if self.ended == "capped":
            return f"a coarse ratio: {'the median of ' * (self.rounds > 1)}{rounds}, all that fit in {self.cap_s:g} s"
        decided = f", the ratio decided within ±{DECIDED:.0%}" if self.ended == "decided" else ""
        return f"medians of {rounds}{decided}"


def compare_with_dot(
    factory: partial,
    request: MixerRequest,
    batch: int,
    rounds: int = ROUNDS,
    device: torch.device | None = None,
    seed: int = 0,
    cap_s: float | None = None,
) -> Speed:
    """Forward and backward of the mixer ``factory`` builds for ``request`` and of ``dot`` built for the same request,
    in training mode on the path a run trains with, on random tokens (``batch``, ``request.num_tokens`` or 64,
    ``request.dim``); time in alternating rounds (the order swapped every round, so that a machine getting busier
    slows both alike), memory measured once each. The rounds stop early once the ratio is decided (:func:`decided`),
    or before one that would end more than ``cap_s`` seconds (default :data:`CAP_S`) after the start: a slow mixer's
    ratio is then coarse. Beyond the rounds each mixer takes a warm-up step, a calibration step (none where the warm-up
    took over :data:`SLOW_STEP_S`) and the memory's."""
    cap_s = CAP_S if cap_s is None else cap_s
    began = time.perf_counter()
    device = device or torch.device("cpu")
    torch.manual_seed(seed)
    mixers = [make_mixer(f, **request._asdict()).to(device).train() for f in (factory, partial(DotAttention))]
    x = torch.randn(batch, request.num_tokens or 64, request.dim, device=device)
    repeats = [calibrate(m, x) for m in mixers]
    times: list[list[float]] = [[], []]
    ended = "all"
    for r in range(rounds):
        start = time.perf_counter()
        for i in (0, 1) if r % 2 == 0 else (1, 0):
            times[i].append(measure(mixers[i], x, repeats[i]))
        now = time.perf_counter()
        if r + 1 == rounds:
            break
        if decided(times):
            ended = "decided"
            break
        if now + (now - start) - began > cap_s:
            ended = "capped"
            break
    costs = [Cost(statistics.median(t), memory(m, x)) for t, m in zip(times, mixers)]
    return Speed(costs[0], costs[1], len(times[0]), device, ended, cap_s)


def decided(times: list[list[float]]) -> bool:
    """Whether the rounds so far settle the time ratio: the 95% interval of the median of the rounds' ratios
    (``scipy.stats.quantile_test``, an interval between two of them) lies within :data:`DECIDED` of that median."""
    from scipy.stats import quantile_test

    if len(times[0]) < MIN_DECIDED:
        return False
    ratios = [a / max(b, 1e-12) for a, b in zip(*times)]
    middle = statistics.median(ratios)
    interval = quantile_test(ratios, q=middle).confidence_interval(0.95)
    return bool(middle * (1 - DECIDED) <= interval.low and interval.high <= middle * (1 + DECIDED))


def step(mixer: nn.Module, x: Tensor) -> None:
    """One forward and backward pass of a mixer, its gradients cleared as an optimizer would."""
    mixer.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_(True)
    mixer(x)[0].sum().backward()


def calibrate(mixer: nn.Module, x: Tensor) -> int:
    """How many steps make a measure of about :data:`MIN_MEASURE_S` (after a warm-up step). A warm-up slower than
    :data:`SLOW_STEP_S` needs no other step to say it: one step a measure."""
    if measure(mixer, x, 1) > SLOW_STEP_S:
        return 1
    once = measure(mixer, x, 1)
    return max(1, round(MIN_MEASURE_S / max(once, 1e-6)))


def measure(mixer: nn.Module, x: Tensor, repeats: int) -> float:
    """Seconds per step over ``repeats`` steps (the device waited for)."""
    synchronize(x.device)
    start = time.perf_counter()
    for _ in range(repeats):
        step(mixer, x)
    synchronize(x.device)
    return (time.perf_counter() - start) / repeats


def memory(mixer: nn.Module, x: Tensor) -> int:
    """The memory of one step: on a GPU the peak allocated above what was allocated before it; on a CPU, which keeps
    no such count, the bytes of the tensors saved for the backward pass (the part of training memory that grows
    with batch and length), parameters and the input left out."""
    if x.device.type == "cuda":
        torch.cuda.synchronize(x.device)
        before = torch.cuda.memory_allocated(x.device)
        torch.cuda.reset_peak_memory_stats(x.device)
        step(mixer, x)
        return torch.cuda.max_memory_allocated(x.device) - before
    owned = {p.untyped_storage().data_ptr() for p in mixer.parameters()} | {x.untyped_storage().data_ptr()}
    saved: dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in owned:
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step(mixer, x)
    return sum(saved.values())


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def machine(device: torch.device | None = None) -> str:
    """The machine a timing was measured on: the GPU's name, or the CPU's model and the instruction sets its kernels
    choose between (Linux's /proc/cpuinfo, as lscpu reads it), the threads torch uses and torch's version."""
    if device is not None and device.type == "cuda":
        return f"GPU {torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    model, flags = platform.processor() or platform.machine(), []
    info = Path("/proc/cpuinfo")
    if info.exists():
        lines = {
            key.strip(): value.strip()
            for key, _, value in (line.partition(":") for line in info.read_text().splitlines())
        }
        model, present = lines.get("model name") or model, set(lines.get("flags", "").split())
        flags = [f for f in FLAGS if f in present]
    shown = f" ({', '.join(flags)})" if flags else ""
    threads = torch.get_num_threads()
    return f"CPU {model}{shown}, {threads} thread{'s' if threads > 1 else ''}, torch {torch.__version__}"


def duration(seconds: float) -> str:
    """``4.09 ms``, or ``1.52 s`` from a second on."""
    return f"{seconds:.3g} s" if seconds >= 1 else f"{seconds * 1e3:.3g} ms"


def megabytes(size: int) -> str:
    return f"{size / 2**20:.3g} MiB"
