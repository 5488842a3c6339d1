"""The GPU tier (``pytest -m gpu``, skipped without CUDA): every mixer on every path on the GPU in float32 and bf16
against a float64 reference on the CPU, without a host read (``torch.cuda.set_sync_debug_mode("error")`` raises on
one), and a few ``trainer=gpu trainer.precision=bf16-mixed`` steps of every task family."""

from __future__ import annotations

import copy
from contextlib import contextmanager

import pytest
import torch
from helpers import read_metrics, run_cli, run_dirs
from mixer_cases import CASES, IDS, B, C, build, masks

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]

TOKENS = 300  # long enough for euclid's tiles and SDPA's kernels to take their general paths
TOLERANCE = {"float32": 2e-4, "bf16": 2e-2}  # largest error over the reference's largest magnitude
# euclid's score, 1/distance, magnifies the bf16 rounding of q and k from their projections: 0.049 in bf16 on a CPU and
# on a GPU alike, on both its paths (the other mixers: 0.003-0.012)
BF16_EUCLID = 6e-2


@contextmanager
def no_host_reads():
    """Any synchronisation of the host with the GPU (.item(), nonzero, a copy to the CPU) raises inside."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def relative(got: torch.Tensor, want: torch.Tensor) -> float:
    """The largest error over the reference's largest magnitude."""
    return ((got.double().cpu() - want).abs().max() / want.abs().max().clamp_min(1e-12)).item()


@pytest.mark.parametrize("precision", ["float32", "bf16"])
@pytest.mark.parametrize(("name", "path"), CASES, ids=IDS)
def test_every_mixer_on_the_gpu_gives_the_float64_numbers_without_host_reads(name, path, precision):
    reference = build(name, path, tokens=TOKENS).double()
    on_gpu = copy.deepcopy(build(name, path, tokens=TOKENS)).cuda()
    torch.manual_seed(1)
    x = torch.randn(B, TOKENS, C, dtype=torch.float64)
    grad = torch.randn(B, TOKENS, C, dtype=torch.float64)
    for mask in masks(name, tokens=TOKENS):
        want_out, _ = reference(x.requires_grad_(), mask=mask)
        want = (want_out, *torch.autograd.grad(want_out, (x, *reference.parameters()), grad))
        x_gpu, grad_gpu = x.detach().float().cuda().requires_grad_(), grad.float().cuda()
        mask_gpu = None if mask is None else mask.cuda()
        with no_host_reads():
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
                out, _ = on_gpu(x_gpu, mask=mask_gpu)
            got = (out, *torch.autograd.grad(out, (x_gpu, *on_gpu.parameters()), grad_gpu.to(out.dtype)))
        gradients = max((g.double().cpu() - w).abs().max() for g, w in zip(got[1:], want[1:]))
        errors = relative(got[0], want[0]), (gradients / max(w.abs().max() for w in want[1:])).item()
        tolerance = BF16_EUCLID if (name, precision) == ("euclid", "bf16") else TOLERANCE[precision]
        assert max(errors) <= tolerance, (mask is not None, errors)  # output, and gradients on their common scale


QUIET = [
    "trainer=gpu",
    "trainer.precision=bf16-mixed",
    "trainer.max_epochs=1",
    "trainer.limit_train_batches=4",
    "trainer.limit_val_batches=2",
    "trainer.limit_test_batches=2",
    "callbacks.progress_bar.refresh_rate=0",
    "model=dot,euclid",
    "hydra/launcher=basic",
]
FAMILIES = {
    "image_classification": ["data=digits"],
    "image_classification_vit": ["data=digits", "net=vit", "net.dim=32", "model.heads=2"],
    "next_token": ["data=corpus", "data.repeats=2"],
    "answer_tokens": [
        "data=mqar",
        "net.dim=32",
        "data.train_size=256",
        "data.val_size=64",
        "data.test_size=64",
        "model.heads=2",
    ],
    "sequence_classification": [
        "data=listops",
        "net.dim=32",
        "data.train_size=256",
        "data.val_size=64",
        "data.test_size=64",
    ],
    "seq2seq": ["data=dates", "net.dim=32", "data.train_size=256", "data.val_size=64", "data.test_size=64"],
    "translation": ["data=pairs"],
}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_task_family_trains_a_few_bf16_mixed_steps_on_the_gpu(family, tmp_path):
    overrides = FAMILIES[family]
    if family == "translation":
        words = ["cero", "uno", "dos", "tres", "cuatro"], ["zero", "one", "two", "three", "four"]
        lines = [
            f"{words[0][i % 5]} {words[0][i // 5 % 5]}\tit is {words[1][i % 5]} {words[1][i // 5 % 5]} ."
            for i in range(60)
        ]
        (tmp_path / "pairs.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        overrides = [*overrides, f"data.path={tmp_path / 'pairs.tsv'}"]
    run_cli(tmp_path, "--multirun", *overrides, *QUIET)
    runs = run_dirs(tmp_path / "outputs")
    assert len(runs) == 2
    for run in runs:
        metrics = read_metrics(run)
        assert metrics["status"] == "ok", metrics
        assert "used: True" in (run / "train.log").read_text(), "Lightning did not train on the GPU"


@pytest.mark.parametrize("path", ["explicit", "fused"])
def test_euclid_compiled_on_the_gpu_gives_the_eager_numbers(path):
    """torch.compile (Triton on the GPU) of euclid, forward and backward, in one graph: the explicit path traced, the
    fused path's Triton kernel as one operator of the graph."""
    from attnexp.mixers import EuclidAttention

    torch.manual_seed(0)
    attn = EuclidAttention(64, heads=4, path=path).cuda()
    x = torch.randn(4, 256, 64, device="cuda", requires_grad=True)
    grad = torch.randn(4, 256, 64, device="cuda")
    results = []
    for module in (attn, torch.compile(attn, fullgraph=True)):
        out = module(x)[0]
        results.append((out, *torch.autograd.grad(out, (x, *attn.parameters()), grad)))
    for compiled, eager in zip(*results):
        torch.testing.assert_close(compiled, eager, atol=1e-4, rtol=1e-3)
