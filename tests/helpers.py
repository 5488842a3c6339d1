"""Helpers shared by the tests: the commands run in the test's process (``run_script``, ``run_cli``, ``run_kit``) or as
processes of their own where a process is the subject (``run_process``, ``start``), stand-in data files, composed
configs, event files."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import runpy
import signal
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time
import traceback
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import NamedTuple

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from attnexp.cli.train import CONFIG_DIR  # registers the config's resolvers

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = Path(sysconfig.get_path("scripts"))  # where the interpreter that runs the tests installed attnexp's commands
FAST = ["trainer.max_epochs=1", "trainer.limit_train_batches=3", "callbacks.progress_bar.refresh_rate=0"]


def user_env(env: dict | None = None) -> dict[str, str]:
    """A user's shell: this process's environment without PYTHONPATH or a thread count, then ``env`` (a test about one
    of those sets it there)."""
    shell = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OMP_NUM_THREADS")}
    return {**shell, **(env or {})}


def command(name: str, *args: str) -> list[str]:
    """The installed console script ``name`` (``attnexp``, ``attnexp-check``, ...) with ``args``, as a user types it."""
    script = SCRIPTS / name
    assert script.is_file(), f"{script} is missing: install the checkout first (pip install -e '.[test]')"
    return [str(script), *args]


def run_process(
    cwd: Path, name: str, *args: str, env: dict | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """The console script ``name`` with ``args`` as a process of its own, started in ``cwd`` as a user's shell would:
    for tests whose subject is a process (signals, installs, imports at start-up, an exit status of the script)."""
    return subprocess.run(
        command(name, *args), cwd=cwd, env=user_env(env), capture_output=True, text=True, timeout=timeout
    )


def entry_point(name: str):
    """The function the installed console script ``name`` calls (the distribution's entry point)."""
    scripts = entry_points(group="console_scripts")
    (found,) = [ep for ep in scripts if ep.name == name and ep.value.startswith("attnexp.")]
    return found.load()


@contextlib.contextmanager
def output_captured() -> Iterator[list[str]]:
    """Everything written to file descriptors 1 and 2 in a block (Python's streams, a library's C code, a child
    process), as ``[stdout, stderr]`` once the block ends."""
    sys.stdout.flush(), sys.stderr.flush()
    said: list[str] = []
    streams = sys.stdout, sys.stderr
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        saved = [os.dup(1), os.dup(2)]
        os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
        sys.stdout = open(1, "w", buffering=1, closefd=False, errors="backslashreplace")  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")  # noqa: SIM115
        try:
            yield said
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            sys.stdout, sys.stderr = streams
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)
            for file in (out, err):
                file.seek(0)
                said.append(file.read().decode(errors="backslashreplace"))


def script_path(first: str, pythonpath: str = "") -> list[str]:
    """``sys.path`` as an interpreter starting a script sets it: the script's folder ``first``, ``pythonpath``, then
    the interpreter's own entries; not the test folders pytest put there."""
    tests = REPO / "tests"
    own = [p for p in sys.path if p and not Path(p).resolve().is_relative_to(tests)]
    return [first, *(p for p in pythonpath.split(os.pathsep) if p), *(p for p in own if p != first)]


def run_script(cwd: Path, name: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The console script ``name`` with ``args``, run in this process as its process would run it: the function of
    its entry point called with ``sys.argv``, in ``cwd``, with a user's shell's environment (and ``env``: its
    ``PYTHONPATH`` goes on ``sys.path`` as an interpreter's start puts it), its output captured and its exit status as
    the process would end with it (an uncaught error: 1, its traceback on stderr)."""
    return in_process(entry_point(name), [name, *args], cwd, str(SCRIPTS), env)


def run_python(cwd: Path, script: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python SCRIPT ARGS`` (a benchmark of scripts/) run in this process as :func:`run_script` runs a command, held
    as a command is (:func:`attnexp.cli.command.held`): what it changes in the process is put back."""
    from attnexp.cli.command import held

    path = Path(cwd, script).resolve()

    def main() -> None:
        with held(path.name):
            runpy.run_path(str(path), run_name="__main__")

    return in_process(main, [str(path), *args], cwd, str(path.parent), env)


def in_process(entry, argv: list[str], cwd: Path, first: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``entry()`` with ``sys.argv`` = ``argv`` in ``cwd``, ``sys.path`` starting at ``first``, a user's shell's
    environment and ``env``; what it prints captured; the exit status its process would end with."""
    environ, here, before, path = user_env(env), os.getcwd(), dict(os.environ), list(sys.path)
    root = logging.getLogger()
    logged = list(root.handlers), root.level  # pytest's capture of log records: a fresh process's root has none
    root.handlers[:], root.level = [], logging.WARNING
    with output_captured() as said:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        sys.argv[:] = argv
        sys.path[:] = script_path(first, environ.get("PYTHONPATH", ""))
        try:
            entry()
            status = 0
        except SystemExit as ended:
            status = ended.code if isinstance(ended.code, int) else int(ended.code is not None)
            if isinstance(ended.code, str):
                print(ended.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            status = 1
        finally:
            os.chdir(here)
            os.environ.clear()
            os.environ.update(before)
            sys.path[:] = path
            root.handlers[:], root.level = logged
    return subprocess.CompletedProcess(argv, status, *said)


def run_cli(cwd: Path, *overrides: str, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``attnexp`` with ``overrides`` in ``cwd`` (in this process)."""
    proc = run_script(cwd, "attnexp", *overrides, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"attnexp {' '.join(overrides)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def run_kit(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """Run ``attnexp-check`` with ``args`` in ``cwd`` (in this process)."""
    return run_script(cwd, "attnexp-check", *args)


def run_dirs(root: Path) -> list[Path]:
    """Every run folder (one holding metrics.json) under ``root``, sorted, once each: a sweep's links to its jobs' runs
    are followed, and a run reached both ways is named by its own folder."""
    found: dict[Path, Path] = {}
    for top, _, files in sorted(os.walk(root, followlinks=True)):
        if "metrics.json" in files:
            path = Path(top)
            real = path.resolve()
            if real not in found or path == real:
                found[real] = path
    return sorted(found.values())


def read_metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


def write_idx(raw, name: str, array: np.ndarray) -> None:
    dims = array.shape
    header = struct.pack(">HBB", 0, 0x08, len(dims)) + struct.pack(f">{len(dims)}I", *dims)
    (raw / name).write_bytes(header + array.astype(np.uint8).tobytes())


def fake_mnist(root, n_train=120, n_test=40, seed=0, folder="MNIST"):
    """Small random IDX files in torchvision's layout (``<root>/<folder>/raw``); returns the arrays written."""
    rng = np.random.default_rng(seed)
    raw = root / folder / "raw"
    raw.mkdir(parents=True)
    arrays = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28))
        labels = rng.integers(0, 10, size=(n,))
        write_idx(raw, f"{split}-images-idx3-ubyte", images)
        write_idx(raw, f"{split}-labels-idx1-ubyte", labels)
        arrays[split] = (images, labels)
    return arrays


class Events(NamedTuple):
    """What a folder's TensorBoard event files hold."""

    scalars: dict[str, list[float]]  # tag -> values, in order
    steps: dict[str, list[int]]  # tag -> their steps
    images: set[str]
    hparams: set[str]  # the keys of the HParams session, as TensorBoard shows them
    experiments: int  # HParams "experiment" summaries written
    texts: set[str]
    session: dict  # shown key -> the session's value (a protobuf Value)
    columns: list[str]  # the experiment's hparams as TensorBoard orders and shows them
    metric_columns: list[str]  # the experiment's metrics in order


def read_events(run) -> Events:
    """Scalars with their steps, image tags, HParams keys and columns and Text tags, from all event files of a folder.
    HParams columns are ordered as TensorBoard's HParams backend orders them: by name (differing ones first)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
    from tensorboard.util.tensor_util import make_ndarray

    found = Events({}, {}, set(), set(), 0, set(), {}, [], [])
    experiments, shown, values = 0, {}, {}
    for path in sorted(run.glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name
                if plugin == "hparams":
                    data = HParamsPluginData.FromString(value.metadata.plugin_data.content)
                    values.update(data.session_start_info.hparams)
                    if data.HasField("experiment"):
                        experiments += 1
                        infos = sorted(data.experiment.hparam_infos, key=lambda i: (not i.differs, i.name))
                        shown = {i.name: i.display_name or i.name for i in infos}
                        found.columns[:] = [shown[i.name] for i in infos]
                        found.metric_columns[:] = [m.display_name or m.name.tag for m in data.experiment.metric_infos]
                elif plugin == "text":
                    found.texts.add(value.tag.split("/")[0])
                elif plugin == "images" or value.HasField("image"):
                    found.images.add(value.tag)
                elif plugin == "scalars" or value.HasField("simple_value"):
                    number = value.simple_value if value.HasField("simple_value") else float(make_ndarray(value.tensor))
                    found.scalars.setdefault(value.tag, []).append(number)
                    found.steps.setdefault(value.tag, []).append(event.step)
    found.session.update({shown.get(k, k): v for k, v in values.items()})
    found.hparams.update(found.session)
    return found._replace(experiments=experiments)


def wandb_records(path: Path):
    """The records of a W&B offline run's ``.wandb`` file (``wandb sync`` uploads them), as W&B's protobuf ``Record``:
    LevelDB's log format (32 KiB blocks of chunks: checksum, length, type) after a 7-byte header. W&B's Python package
    has no reader of its own since its core moved to a Go service."""
    from wandb.proto.wandb_internal_pb2 import Record

    data, pos, block, chunks = path.read_bytes(), 7, 32768, []
    while pos + 7 <= len(data):
        left = block - pos % block
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        if left < 7 or kind == 0:  # a block's tail, or padding
            pos += left
            continue
        chunks.append(data[pos + 7 : pos + 7 + length])
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last chunk of one
            record = Record()
            record.ParseFromString(b"".join(chunks))
            chunks = []
            yield record


def options(group: str) -> list[str]:
    """The options of a config group, from the files in configs/: tests cover new ones without edits."""
    return sorted(p.stem for p in (Path(CONFIG_DIR) / group).glob("*.yaml"))


def model_factory(variant: str, **overrides):
    """The variant's mixer factory exactly as its config file builds it (``configs/model/<variant>.yaml``)."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    return instantiate(OmegaConf.merge(OmegaConf.load(Path(CONFIG_DIR) / "model" / f"{variant}.yaml"), overrides))


PUBLISHED = REPO / "examples" / "published_attention"


def published_factory(name: str, **overrides):
    """A mixer of examples/published_attention as its config builds it (``configs/model/<name>.yaml``), its folder
    importable as attnexp makes a user's folder."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    if str(PUBLISHED) not in sys.path:
        sys.path.insert(0, str(PUBLISHED))
    return instantiate(OmegaConf.merge(OmegaConf.load(PUBLISHED / "configs" / "model" / f"{name}.yaml"), overrides))


def causal_mixers() -> list[str]:
    """The options of configs/model that can be causal (the others refuse, saying why)."""
    from attnexp.errors import AttnexpError

    found = []
    for name in options("model"):
        try:
            model_factory(name)(dim=8, num_tokens=4, causal=True)
            found.append(name)
        except AttnexpError as err:
            assert "cannot predict next tokens" in str(err)
    return found


def compose_cfg(overrides: list[str], tmp_path: Path):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(tmp_path)
        cfg.hydra.job.num = 0
    HydraConfig.instance().set_config(cfg)
    return cfg


SLOW = [
    "trainer.max_epochs=3",
    "trainer.deterministic=true",
    "data.batch_size=16",
    "net.dim=16",
    "seed=3",
    "callbacks.progress_bar.refresh_rate=0",
]


def start(cwd, *overrides, new_session: bool = False, sigint=signal.SIG_DFL):
    """``attnexp`` in the background (``new_session``: in a process group of its own, as a terminal would start it),
    with Ctrl-C's default action whatever this process inherited, or ``sigint=signal.SIG_IGN`` as a script's
    background job (``attnexp ... &``) starts it."""
    return subprocess.Popen(
        command("attnexp", *overrides),
        cwd=cwd,
        env=user_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=new_session,
        preexec_fn=functools.partial(signal.signal, signal.SIGINT, sigint),
    )


def wait_for_epochs(cwd, proc, epochs: int, timeout: float = 120) -> dict:
    """Poll the run's metrics.json until it reports ``epochs`` finished epochs."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for run in run_dirs(cwd / "outputs"):
            try:
                record = read_metrics(run)
            except (json.JSONDecodeError, FileNotFoundError):
                continue
            if record.get("epochs", 0) >= epochs and (run / "checkpoints" / "last.ckpt").exists():
                return record
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.02)
    raise AssertionError("the run did not reach the wanted epoch in time")


def assert_prepare_data_leaves_reading_to_setup(dm, monkeypatch) -> None:
    """Lightning calls prepare_data before setup: with the files in place it reads nothing, and setup reads
    each split once (``dm._read(train)``)."""
    reads = []
    read = dm._read
    monkeypatch.setattr(dm, "_read", lambda train: reads.append(train) or read(train))
    dm.prepare_data()
    assert reads == []
    dm.setup()
    assert reads == [True, False]


def quiet_trainer(**settings):
    """A Lightning Trainer on the CPU that writes and prints nothing (no logger, checkpoint, bar, model summary or
    sanity check) unless ``settings`` say otherwise."""
    import pytorch_lightning as pl

    quiet = dict(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
    return pl.Trainer(**{**quiet, "enable_model_summary": False, "num_sanity_val_steps": 0, **settings})


def line_of(cls: type, text: str) -> str:
    """``file:line`` of the line of ``cls``'s source that holds ``text``, the file as attnexp's messages show it."""
    import inspect

    from attnexp.mixers.frames import shown

    lines, first = inspect.getsourcelines(cls)
    number = first + next(i for i, line in enumerate(lines) if text in line)
    return f"{shown(Path(inspect.getsourcefile(cls)))}:{number}"
