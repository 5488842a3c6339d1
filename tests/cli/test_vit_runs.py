"""Every variant trains inside the ViT through the CLI: on fake CIFAR-10 files, on digits and on MNIST."""

from __future__ import annotations

import pytest
from cifar10_files import random_cifar10
from helpers import FAST, compose_cfg, fake_mnist, read_metrics, run_dirs
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from attnexp.errors import AttnexpError

VARIANTS = ["dot", "euclid", "masked", "se", "mlp"]
SMALL_VIT = ["net=vit", "net.dim=32", "net.depth=2", "model.heads=2"]


def check_runs(root, data: str) -> None:
    runs = run_dirs(root / "outputs")
    assert len(runs) == len(VARIANTS)
    records = [read_metrics(run) for run in runs]
    assert sorted(r["mixer"] for r in records) == sorted(VARIANTS)
    for record in records:
        assert record["status"] == "ok" and record["net"] == "vit" and record["data"] == data, record
        assert 0.0 <= record["test/acc"] <= 1.0 and record["params"] > 0


def test_every_variant_trains_on_cifar_files(cli, tmp_path):
    random_cifar10(tmp_path / "data", n_train=200, n_test=20)
    overrides = [
        "data=cifar10",
        "data.download=false",
        "data.verify_checksums=false",
        "data.val_size=40",
        "data.batch_size=32",
    ]
    root, _ = cli(
        "--multirun",
        f"model={','.join(VARIANTS)}",
        *overrides,
        *SMALL_VIT,
        *FAST,
        "hydra/launcher=basic",  # one job after another: the variants are the subject here
        env={"ATTNEXP_DATA_DIR": str(tmp_path / "data")},
    )
    check_runs(root, "cifar10")


def test_every_variant_trains_on_digits(cli):
    root, _ = cli(
        "--multirun", f"model={','.join(VARIANTS)}", *SMALL_VIT, *FAST, "~callbacks.figures", "hydra/launcher=basic"
    )
    check_runs(root, "digits")


def test_vit_trains_on_mnist_patches(cli, tmp_path):
    fake_mnist(tmp_path / "data")
    root, _ = cli(
        "data=mnist",
        "data.download=false",
        "data.val_size=20",
        *SMALL_VIT,
        *FAST,
        env={"ATTNEXP_DATA_DIR": str(tmp_path / "data")},
    )
    (run,) = run_dirs(root / "outputs")
    record = read_metrics(run)
    assert record["status"] == "ok" and record["net"] == "vit" and record["data"] == "mnist"
    assert (
        record["params"]
        == 2 * (2 * 32 + 4 * (32 * 32 + 32) + 2 * 32 + 2 * 32 * 64 + 64 + 32)
        + 49 * 32
        + 32
        + 32
        + 17 * 32
        + 2 * 32
        + 330
    )


@pytest.mark.parametrize(
    "override,message",
    [
        ("model.heads=3", "dim=32 is not divisible by heads=3"),
        ("net.patch=4", "already cuts 2x2 patches"),
    ],
)
def test_bad_vit_settings_stop_before_training(tmp_path, override, message):
    """The error comes from building the net, which the entrypoint does before the trainer exists."""
    cfg = compose_cfg([*SMALL_VIT, override], tmp_path)
    datamodule = instantiate(cfg.data)
    with pytest.raises(InstantiationException, match=message) as err:
        instantiate(cfg.net, **datamodule.spec)
    assert isinstance(err.value.__cause__, AttnexpError)
