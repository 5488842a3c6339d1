"""The command line answers --help, --cfg and config-level bad input without importing torch."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import REPO

PROBE = """
import sys
sys.argv = ["attnexp", *sys.argv[1:]]
import attnexp.cli.compare, attnexp.cli.predict, attnexp.cli.sweep  # noqa: F401
from attnexp.cli.train import cli
try:
    cli()
except SystemExit as stop:
    print("exit", stop.code)
heavy = sorted(m for m in ("torch", "pytorch_lightning", "torchmetrics", "torchvision", "matplotlib")
               if m in sys.modules)
print("heavy:", ",".join(heavy) or "none")
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["model=euclid", "--cfg", "job"],
        ["--info"],
        ["net.depth=0"],
        ["data.val_size=0"],
        ["trainer.max_epochs=abc"],
    ],
)
def test_no_heavy_import_before_a_run_is_built(args, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert "heavy: none" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    if "=" in args[-1]:  # a bad value: explained, exit status 2
        assert "exit 2" in proc.stdout and "is not allowed" in proc.stderr, proc.stderr[-2000:]


def test_a_mixer_option_is_checked_by_the_mixer(tmp_path):
    """A mixer's own options are its to check (the euclid score is 1/(distance + eps)): explained, exit status 2."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "model=euclid", "model.eps=-1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert "exit 2" in proc.stdout and "model.eps=-1 is not allowed" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize(
    "mixer,options,message",
    [
        ("euclid", {"heads": 0}, "model.heads=0 is not allowed"),
        ("se", {"reduction": 0}, "model.reduction=0 is not allowed"),
    ],
)
def test_each_mixer_refuses_its_bad_options(mixer, options, message):
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from attnexp.errors import AttnexpError

    config = OmegaConf.load(REPO / "configs" / "model" / f"{mixer}.yaml")
    with pytest.raises(AttnexpError, match=message.replace(".", r"\.")):
        instantiate(OmegaConf.merge(config, options))(dim=16, num_tokens=4)


@pytest.mark.parametrize(
    "gpus,affinity,jobs,threads",
    [([], 8, 8, 1), ([], 2, 2, 1), (["/dev/nvidia0"], 16, 8, 2), (["/dev/nvidia0"], 4, 4, 1)],
)
def test_sweeps_run_a_job_per_core_without_a_gpu_and_several_on_one_gpu(monkeypatch, gpus, affinity, jobs, threads):
    from attnexp.cli import hardware as cores

    monkeypatch.setattr(cores.glob, "glob", lambda pattern: gpus)
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: set(range(affinity)))
    assert cores.sweep_jobs() == jobs and cores.threads_per_job(jobs) == threads
    assert cores.threads_per_job(3) == max(1, affinity // 3)


def test_a_path_holding_equals_signs_is_quoted_and_other_unreadable_overrides_explained(tmp_path):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from attnexp.cli.typos import check_syntax, quote_path
    from attnexp.errors import AttnexpError

    folder = "outputs/runs/dot_digits_3f2a9c01/seed=1,trainer.max_epochs=2/checkpoints/last.ckpt"
    assert quote_path(f"ckpt_path={folder}", ("ckpt_path",)) == f"ckpt_path='{folder}'"
    assert (
        quote_path("paths.log_dir=a=b", ()) == "paths.log_dir='a=b'"
        and quote_path("seed=1", ("ckpt_path",)) == "seed=1"
    )
    check_syntax([f"ckpt_path='{folder}'", "seed=1", "--multirun", "model=dot,euclid"])
    parser = OverridesParser.create()
    for name in ("a_data.path='x.tsv',seed=1", "b_data.path='x.tsv',note=\"y\"", "c=1"):  # folders of quoted overrides
        (override,) = parser.parse_overrides([quote_path(f"run=out/{name}", ("run",))])
        assert override.value() == f"out/{name}"
    with pytest.raises(AttnexpError, match=r"goes in quotes inside the argument: resume_from='a=b'"):
        check_syntax(["resume_from=a=b"])
