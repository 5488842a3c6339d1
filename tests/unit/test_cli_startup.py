"""What the command line decides before it builds anything: each mixer's own options refused by the mixer, sweep jobs
per core, paths holding '=' quoted (that --help, --cfg and bad values import no torch: tests/process/)."""

from __future__ import annotations

import pytest
from helpers import REPO


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
