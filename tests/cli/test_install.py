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


def built_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of the sources (the build leaves nothing in the checkout)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for name in ("attnexp", "configs", "hydra_plugins"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = (tmp_path / "dist").glob("attnexp-*.whl")
    return wheel


def test_the_wheel_carries_every_module_and_config_and_runs_outside_the_checkout(tmp_path):
    wheel = built_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    configs = {
        f"attnexp/configs/{p.relative_to(REPO / 'configs').as_posix()}" for p in (REPO / "configs").rglob("*.yaml")
    }
    modules = {
        p.relative_to(REPO).as_posix() for top in ("attnexp", "hydra_plugins") for p in (REPO / top).rglob("*.py")
    }
    assert configs <= names and modules <= names, sorted((configs | modules) - names)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    # --system-site-packages gives the base interpreter's packages: where this one is itself a virtual environment,
    # its own packages come through a .pth file (paths only: its editable install of attnexp stays out)
    (purelib,) = (venv / "lib").glob("python*/site-packages")
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
    check = run("attnexp-check", "model=relu")
    assert check.returncode == 0 and "14 checks: all passed" in check.stdout, check.stdout + check.stderr[-2000:]
    for command, words in (("attnexp-predict", "checkpoint: best"), ("attnexp-compare", "usage: attnexp-compare")):
        proc = run(command, "--help")  # predict's config (configs/predict.yaml) is found in the wheel too
        assert proc.returncode == 0 and words in proc.stdout, proc.stdout + proc.stderr[-2000:]
