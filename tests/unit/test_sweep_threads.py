"""Each job of a joblib sweep gets its share of the cores, whatever way ``hydra.launcher.n_jobs`` counts them."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig

from attnexp.cli import hardware, train


@pytest.fixture
def sweep_with(monkeypatch):
    """Sets Hydra's config of a joblib sweep job with ``n_jobs`` on a machine of 8 cores."""
    monkeypatch.setattr(train, "cores", lambda: 8)
    monkeypatch.setattr(hardware, "cores", lambda: 8)

    def make(n_jobs: int) -> None:
        overrides = ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={n_jobs}", "hydra.mode=MULTIRUN"]
        with initialize_config_dir(config_dir=train.CONFIG_DIR, version_base=None):
            HydraConfig.instance().set_config(compose("train", overrides=overrides, return_hydra_config=True))

    yield make
    HydraConfig.instance().cfg = None


@pytest.mark.parametrize(("n_jobs", "jobs", "threads"), [(4, 4, 2), (8, 8, 1), (-1, 8, 1), (-5, 4, 2)])
def test_each_joblib_job_gets_its_share_of_the_cores(sweep_with, n_jobs, jobs, threads):
    sweep_with(n_jobs)
    assert train.joblib_jobs() == jobs
    assert hardware.threads_per_job(jobs) == threads  # joblib's -1: a job per core, one thread each, not all 8
