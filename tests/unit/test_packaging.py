"""The wheel's layout: every package of attnexp/ is listed for setuptools, and the repository's configs/ go with it."""

from __future__ import annotations

import tomllib
from helpers import REPO

from attnexp import config_dir


def test_every_package_folder_is_in_the_wheel_list():
    """pyproject.toml lists the packages (it maps configs/ into attnexp/configs): a new sub-package must be added."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    inits = (REPO / "attnexp").rglob("__init__.py")
    found = {".".join(p.parent.relative_to(REPO).parts) for p in inits}
    assert listed == found | {"attnexp.configs"}


def test_the_configs_go_into_the_package_and_are_found_there_once_installed():
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"attnexp.configs": "configs"}
    assert setuptools["package-data"]["attnexp.configs"] == ["**/*.yaml"]
    assert (
        config_dir() == REPO / "configs"
    )  # a checkout: the repository's; a wheel: attnexp/configs (tests/cli/test_install.py)


def test_the_trackers_are_extras_the_base_install_does_not_pull():
    """pip install -e . installs neither MLflow nor W&B; the extras do, and the test extra brings W&B and MLflow's
    client only (mlflow-skinny: CI's install time), not the full mlflow, with the Flask and flask-cors that the skinny
    package's own ``mlflow server`` runs on: CI runs tests/process/test_mlflow_server.py."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = [d.split(">")[0].split("[")[0].strip().lower() for d in project["dependencies"]]
    assert not {n for n in names if n.startswith(("mlflow", "wandb"))}, names
    extras = project["optional-dependencies"]
    assert extras["mlflow"][0].startswith("mlflow-skinny") and extras["wandb"][0].startswith("wandb")
    assert "attnexp[mlflow]" in extras["test"] and not any(d.startswith("mlflow>") for d in extras["test"])
    assert "attnexp[wandb]" in extras["test"]
    tested = {d.split("<")[0].split(">")[0].strip().lower() for d in extras["test"]}
    assert {"flask", "flask-cors"} <= tested, tested
