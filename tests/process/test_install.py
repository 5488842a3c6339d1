"""attnexp as users install it: a wheel that carries the configs, installed in a virtual environment, whose commands
work from a folder outside the repository. (The environment reuses the site-packages of the interpreter that runs the
tests for torch and the other dependencies, a virtual environment's too; attnexp itself comes from the wheel.)"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

from helpers import REPO


def environment(folder: Path) -> Path:
    """A new virtual environment, with pip, that sees this interpreter's packages (torch and the rest), and its
    site-packages folder. --system-site-packages gives the base interpreter's: where this one is itself a virtual
    environment (made by venv or by uv), its own come through a .pth file (paths only: its editable install of attnexp
    stays out)."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(folder)], check=True, timeout=300)
    (purelib,) = (folder / "lib").glob("python*/site-packages")
    return purelib


def built_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of the sources, built by setuptools' build backend as pip calls it (the interpreter that runs
    the tests may have no pip, as in a virtual environment made by uv); the build leaves nothing in the checkout."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for name in ("attnexp", "configs"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    build = f"from setuptools import build_meta; build_meta.build_wheel({str(tmp_path / 'dist')!r})"
    subprocess.run([sys.executable, "-c", build], cwd=src, check=True, capture_output=True, timeout=600)
    (wheel,) = (tmp_path / "dist").glob("attnexp-*.whl")
    return wheel


def test_the_wheel_carries_every_module_and_config_and_runs_outside_the_checkout(tmp_path):
    venv = tmp_path / "venv"
    purelib = environment(venv)
    wheel = built_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = {
        f"attnexp/configs/{p.relative_to(REPO / 'configs').as_posix()}" for p in (REPO / "configs").rglob("*.yaml")
    }
    modules = {p.relative_to(REPO).as_posix() for p in (REPO / "attnexp").rglob("*.py")}
    assert configs <= names and modules <= names, sorted((configs | modules) - names)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (purelib / "tests_interpreter.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    project = tmp_path / "project"
    shutil.copytree(REPO / "examples" / "relu_attention", project)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONWARNINGS": "ignore"}

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(venv / "bin" / args[0]), *args[1:]], cwd=project, env=env, capture_output=True, text=True, timeout=600
        )

    where = run(
        "python", "-c", "import attnexp.cli.search_path as s; print(s.__file__); print(s.config_dir())"
    ).stdout.split()
    assert all(w.startswith(str(venv)) for w in where) and where[1].endswith("attnexp/configs"), where
    import torch

    assert run("python", "-c", "import torch; print(torch.__file__)").stdout.strip() == torch.__file__  # this one's
    help_text = run("attnexp", "--help").stdout
    assert "relu" in next(line for line in help_text.splitlines() if line.startswith("model: ")), help_text
    env["ATTNEXP_BUDGET"] = "smoke"  # the documented short budget: two batches of one epoch
    trained = run("attnexp", "model=relu", "callbacks.progress_bar.refresh_rate=0")
    assert trained.returncode == 0, trained.stdout + trained.stderr[-2000:]
    (record,) = (project / "outputs").rglob("metrics.json")
    assert '"mixer": "relu"' in record.read_text() and '"status": "ok"' in record.read_text(), record.read_text()
    for command, words in (("attnexp-predict", "checkpoint: best"), ("attnexp-compare", "usage: attnexp-compare")):
        proc = run(command, "--help")  # predict's config (configs/predict.yaml) is found in the wheel too
        assert proc.returncode == 0 and words in proc.stdout, proc.stdout + proc.stderr[-2000:]
