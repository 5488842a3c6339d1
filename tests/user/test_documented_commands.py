"""The user's tier: every command the documentation shows (README.md, examples/, docs/), run as it is written through
the console scripts' entry points in this process (the first of each console script in README.md as a process of its
own, started from the script pip installed), from a folder outside the checkout, with no PYTHONPATH and the machine's
default threads, one document after another in its own folder, on the small budget that ``ATTNEXP_BUDGET=smoke`` names
(the one documented way to shorten a command without editing it). The data is the tier's own: small MNIST and
Fashion-MNIST files, a text, a parallel text, a picture. A command this tier does not run is in :data:`NOT_RUN`, with
why."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from documented import Command, documented
from helpers import REPO, SCRIPTS, fake_mnist, run_process, run_python, run_script, user_env

MOST_JOBS = 3  # the largest sweep of docs/ this tier runs (README.md's and examples/ run whole): CI's time
GPU, CLUSTER, NETWORK = "needs a GPU", "needs a SLURM cluster", "needs the network"
BENCHMARK = "a benchmark at full size (timings, minutes): docs/benchmarks.md runs each script with --smoke here"
CI_ITSELF = "the install and the test suite's own commands: CI runs them, and this tier inside them"
NOT_RUN = {  # a command as collected (Command.text) -> why this tier does not run it
    "pip install -e .": CI_ITSELF,
    "pip install -e '.[test]'": CI_ITSELF,
    "pytest -n auto --dist loadgroup": CI_ITSELF,
    "pytest tests/unit -n auto": CI_ITSELF,
    "attnexp data=cifar10 model=euclid model.heads=4": NETWORK + " (CIFAR-10 is downloaded; tests/unit/"
    "test_cifar10_loading.py reads files in its format)",
    "attnexp --multirun hydra/launcher=slurm hydra.launcher.partition=gpu model=dot,euclid seed=0,1,2": CLUSTER,
    "attnexp --multirun hydra/launcher=slurm hydra.launcher.partition=gpu trainer=ddp trainer.accelerator=gpu "
    "trainer.devices=4 trainer.num_nodes=2 model=dot,euclid seed=0,1,2": CLUSTER,
    "ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/bench_threads.py --smoke": "six fresh processes, "
    "beside a busy one (a minute: CI's time); tests/unit/test_threads.py tests the rule it measures",
    "ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/bench_waiting.py --smoke": "three fresh processes "
    "(CI's time); tests/unit/test_threads.py tests the rule its table informs",
    "ATTNEXP_DATA_DIR=/path/to/data PYTHONPATH=. python scripts/profile_step.py --smoke": "a ViT trained and "
    "profiled under torch's profiler, beside a plain loop (a minute: CI's time)",
    "PYTHONPATH=. python scripts/bench_kernel_static.py --smoke": "its kernels are compiled offline by "
    "tests/compilers/test_euclid_kernel_compile.py",
    "pip install 'attnexp[mlflow]'": NETWORK + " (CI installs the mlflow extra through [test])",
    "pip install 'attnexp[wandb]'": NETWORK + " (tests/cli/test_trackers.py runs W&B offline where it is installed)",
    "attnexp model=euclid logger=mlflow logger.mlflow.tracking_uri=http://127.0.0.1:5000": "needs a running MLflow "
    "server: tests/process/test_mlflow_server.py starts one and sends a run to it",
}
TRAINED_ELSEWHERE = (  # sweeps of examples/ whose every mixer the kit checks above and a test trains beside dot
    "a sweep of {jobs} jobs (CI's time): the kit checks each of its mixers just above, and tests/cli/"
    "test_published_mixers.py trains each beside dot"
)
GENERATED = "zoology_mqar generates 100,000 sequences a job (minutes of CPU at any budget; CI's time)"
BUDGET = {"ATTNEXP_BUDGET": "smoke"}  # the one documented way to shorten a command without editing it
PLACEHOLDERS = {  # what the documents write for a folder of the user's own
    "/path/to/data": "data",
    "../shared/data": "data",
    "shared/data": "data",
}


def reason_not_run(cmd: Command, jobs: int) -> str | None:
    """Why a documented command is not run here, or None."""
    if cmd.text in NOT_RUN:
        return NOT_RUN[cmd.text]
    if cmd.program == "python" and any(w.startswith("scripts/") for w in cmd.words):
        return GPU if any("gpu_check" in w for w in cmd.words) else None if "--smoke" in cmd.words else BENCHMARK
    if any(w in ("trainer=gpu", "trainer=ddp") for w in cmd.words):
        return GPU
    if any("nanoGPT" in w for w in cmd.words):
        return NETWORK + " (a clone of nanoGPT)"
    if jobs > MOST_JOBS and cmd.file.startswith("docs/"):
        return f"a sweep of {jobs} jobs, more than the {MOST_JOBS} this tier runs of a command in docs/ (CI's time)"
    if jobs > MOST_JOBS and cmd.file == "examples/published_attention/README.md":
        return TRAINED_ELSEWHERE.format(jobs=jobs)
    if "experiment=zoology_mqar" in cmd.words:
        return GENERATED
    if cmd.program == "attnexp-compare" and any(
        "<" in w and not w.startswith("outputs/multirun/<date>") for w in cmd.words
    ):
        return "compares sweeps named in words (<...>), which the document runs above"
    return None


def jobs_of(cmd: Command) -> int:
    """How many jobs a command runs: the product of its comma lists (five data sets in experiment=diagnostics)."""
    jobs = 5 if "experiment=diagnostics" in cmd.words else 1
    for word in cmd.words:
        key, _, value = word.partition("=")
        if value and "," in value and not value.startswith(("[", "'", '"')) and not key.startswith("-"):
            jobs *= len(value.split(","))
    if any(w.startswith("hydra.sweeper.n_trials=") for w in cmd.words):
        jobs = int(next(w for w in cmd.words if w.startswith("hydra.sweeper.n_trials=")).split("=")[1])
    return jobs


COMMANDS = documented()
DOCUMENTS = list(dict.fromkeys(c.file for c in COMMANDS))
STATELESS = ("attnexp", "attnexp-check")  # a command of these that names no earlier output computes the same again


def plan() -> dict[Command, str | None]:
    """Each documented command with why it is not run (None: it is run): the reasons above, and a command the same as
    one run in an earlier place, which would compute the same again."""
    planned: dict[Command, str | None] = {}
    ran: dict[str, str] = {}
    swept: dict[str, Command | None] = {}  # each document's last sweep, None when it is not run
    for cmd in COMMANDS:
        reason = reason_not_run(cmd, jobs_of(cmd))
        same = ran.get(cmd.text) if "--multirun" in cmd.words and cmd.program in STATELESS else None
        planned[cmd] = reason or (f"the same sweep as {same}" if same else None)
        sweep = swept.get(cmd.file)
        if not planned[cmd] and any("<date>/<time>" in w for w in cmd.words) and (sweep is None or planned[sweep]):
            planned[cmd] = f"names the sweep of {sweep.where if sweep else 'a command above'}, which is not run here"
        if "--multirun" in cmd.words:
            swept[cmd.file] = cmd
        if planned[cmd] is None:
            ran.setdefault(cmd.text, cmd.where)
    return planned


PLAN = plan()
SCRIPT_NAMES = ("attnexp", "attnexp-check", "attnexp-compare", "attnexp-predict")
README = [c for c in COMMANDS if c.file == "README.md" and PLAN[c] is None]
STARTED = {c for c in README if c.program in SCRIPT_NAMES and c == next(r for r in README if r.program == c.program)}


def test_every_documented_command_is_run_or_said_why_not():
    """What is not run is said, and names only commands the documents still show; most run."""
    shown = {c.text for c in COMMANDS}
    assert set(NOT_RUN) <= shown, sorted(set(NOT_RUN) - shown)
    first = [
        c
        for c in COMMANDS
        if not c.file.startswith("docs/") and PLAN[c] not in (CI_ITSELF, TRAINED_ELSEWHERE.format(jobs=jobs_of(c)))
    ]
    assert first and all(PLAN[c] is None for c in first), [c.where for c in first if PLAN[c]]  # README, examples/
    assert sorted(c.program for c in STARTED) == sorted(SCRIPT_NAMES)  # each console script once as a process


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A user's folder outside the checkout: the examples beside it, as a clone has them; data of the tier's own under
    data/ (ATTNEXP_DATA_DIR); the files the documents name (book.txt, spa-eng.tsv, three_digits.png); the README's
    my_project/."""
    shutil.copytree(
        REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    data = tmp_path / "data"
    fake_mnist(data, n_train=6000, n_test=1000)
    fake_mnist(data, n_train=6000, n_test=1000, seed=1, folder="FashionMNIST")
    words = np.random.default_rng(0).choice(
        ["el", "perro", "come", "la", "casa", "es", "grande", "un", "gato"], 250_000
    )
    text = " ".join(words)
    (data / "tinyshakespeare").mkdir()
    (data / "tinyshakespeare" / "input.txt").write_text(text)
    (tmp_path / "book.txt").write_text(text)
    pairs = ["the dog eats\tel perro come", "the house is big\tla casa es grande", "a cat sleeps\tun gato duerme"]
    (tmp_path / "spa-eng.tsv").write_text("\n".join(pairs * 200) + "\n")
    write_png(tmp_path / "three_digits.png", np.random.default_rng(0).integers(0, 256, (28, 84)).astype(np.uint8))
    project = tmp_path / "my_project"
    (project / "configs" / "model").mkdir(parents=True)
    (project / "my_attention.py").write_text(MY_ATTENTION)
    (project / "configs" / "model" / "mine.yaml").write_text(
        "_target_: my_attention.MyAttention\n_partial_: true\nheads: 1\n"
    )
    return tmp_path


MY_ATTENTION = """
from attnexp.mixers import MultiHeadAttention


class MyAttention(MultiHeadAttention):
    def score(self, q, k):
        return (q @ k.transpose(-2, -1)) * self.head_dim**-0.5
"""


def write_png(path: Path, image: np.ndarray) -> None:
    import matplotlib.image

    matplotlib.image.imsave(path, image, cmap="gray")


def folder_of_mixer(workspace: Path, cmd: Command) -> Path | None:
    """The folder whose ``configs/model/`` holds a mixer the command names, where the documents run it ("from this
    folder", "from a copy of the example folder"; the README's my_project/); None for a command that names none."""
    named = {m for w in cmd.words if w.startswith("model=") for m in w.removeprefix("model=").split(",")}
    for configs in sorted(workspace.glob("**/configs/model")):
        if any((configs / f"{m}.yaml").is_file() for m in named):
            return configs.parent.parent
    return None


def filled(word: str, cwd: Path, workspace: Path) -> str:
    """A word with the document's placeholders filled: the data folder, the newest sweep, a run of the right kind."""
    for written, ours in PLACEHOLDERS.items():
        if word.endswith(f"={written}"):
            return word.replace(written, str(workspace / ours))
    if "outputs/multirun/<date>/<time>" in word:
        sweeps = sorted((cwd / "outputs" / "multirun").glob("*/*"), key=lambda p: p.stat().st_mtime)
        assert sweeps, f"no sweep in {cwd} to stand for outputs/multirun/<date>/<time>"
        return word.replace("outputs/multirun/<date>/<time>", str(sweeps[-1]))
    return word


def run_folder_for(word: str, cwd: Path, kind: str) -> str:
    """``run=outputs/runs/<run>/seed=0`` (or ``outputs/runs/...``): the newest run of ``kind`` data made here."""
    runs = sorted((cwd / "outputs" / "runs").glob(f"*_{kind}_*/seed=*"), key=lambda p: p.stat().st_mtime)
    assert runs, f"no run of data={kind} in {cwd} for {word}"
    return f"run={runs[-1]}"


PREDICTED = {"prompt": "corpus", "source": "dates", "image": "captions"}  # what a prediction needs a run of


def prepared(cmd: Command, cwd: Path, workspace: Path) -> tuple[list[str], dict[str, str]]:
    """The command's words as the shell runs them, with the placeholders filled, and its environment assignments."""
    env, words = {}, []
    for word in cmd.words:
        if not words and re.fullmatch(r"[A-Z_]+=\S*", word):
            key, _, value = filled(word, cwd, workspace).partition("=")
            env[key] = value
        elif word.startswith("run=outputs/runs/"):
            asked = next(k for k in PREDICTED if any(w.startswith(f"{k}=") for w in cmd.words))
            words.append(run_folder_for(word, cwd, PREDICTED[asked]))
        else:
            words.append(filled(word, cwd, workspace))
    return words, env


def tensorboard_serves(words: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``tensorboard --logdir ...`` serves until stopped: started, its address awaited, stopped."""
    proc = subprocess.Popen(
        [*words, "--port", "0", "--host", "127.0.0.1"],
        cwd=cwd,
        env=user_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    said = ""
    assert proc.stdout is not None
    for line in proc.stdout:
        said += line
        if "http://" in line:
            break
    proc.send_signal(signal.SIGINT)  # stopped as a user stops it, else killed: what is tested is that it serves
    try:
        proc.wait(timeout=10)  # 0.2 s when the stop lands
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=60)
    return subprocess.CompletedProcess(words, 0 if "http://" in said else 1, said, "")


def run_command(cmd: Command, cwd: Path, workspace: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """Run one documented command where the document has got to; return what it did and where the next one runs."""
    if cmd.program == "cd":
        return subprocess.CompletedProcess(cmd.words, 0, "", ""), cwd / cmd.words[1]
    words, env = prepared(cmd, cwd, workspace)
    if words[0] == "pip":  # the document's own install, into a folder of the tier's: the test environment stays as is
        target = workspace / "site"
        words = [str(SCRIPTS / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target",
                 str(target), *words[2:]]  # fmt: skip
        proc = subprocess.run(words, cwd=cwd, env=user_env(env), capture_output=True, text=True, timeout=600)
        return proc, cwd
    if words[0] == "tensorboard":
        return tensorboard_serves([str(SCRIPTS / "tensorboard"), *words[1:]], cwd, env), cwd
    installed = {"PYTHONPATH": str(workspace / "site")} if (workspace / "site").is_dir() else {}
    shell = {**BUDGET, "ATTNEXP_DATA_DIR": str(workspace / "data"), **installed, **env}  # the user's exports
    if words[0] == "python":  # the checkout's script (the tests' data writers beside it), its files written here
        return run_python(workspace, str(REPO / words[1]), *words[2:], env=shell), cwd
    run = run_process if cmd in STARTED else run_script
    return run(cwd, *words, env=shell), cwd


def relu_example_says_true(folder: Path, said: dict[str, subprocess.CompletedProcess]) -> None:
    """examples/relu_attention/README.md: the kit's 14 checks pass; the sweep's folders, metrics.json, TensorBoard's
    HParams and the summary call the mixer relu, with telemetry of weights that are no distributions, and the summary
    compares it with dot."""
    import yaml
    from helpers import read_events, read_metrics, run_dirs

    kit = next(proc for text, proc in said.items() if text.startswith("attnexp-check model=relu"))
    assert "14 checks: all passed" in kit.stdout, kit.stdout
    runs = run_dirs(folder / "outputs" / "runs")
    relu = [r for r in runs if read_metrics(r)["mixer"] == "relu"]
    assert len(runs) == 4 and len(relu) == 2 and all(r.parent.name.startswith("relu_digits_") for r in relu), runs
    dot = yaml.safe_load((next(r for r in runs if r not in relu) / "hparams.yaml").read_text())
    for run in relu:
        metrics, hparams = read_metrics(run), yaml.safe_load((run / "hparams.yaml").read_text())
        assert metrics["status"] == "ok" and metrics["path"] == "explicit"
        assert "attn/layer0/mass" in metrics and "attn/layer0/entropy" not in metrics  # no distributions
        assert hparams["mixer"] == "relu" and all(hparams[k] == dot[k] for k in ("width", "depth", "heads"))
        assert read_events(run).session["mixer"].string_value == "relu"  # TensorBoard's HParams row says relu too
    (summary,) = (folder / "outputs" / "multirun").rglob("summary.md")
    assert "| model=relu | 2 |" in summary.read_text() and "Δ vs model=dot" in summary.read_text()


CLAIMS = {  # what a document says its commands make, checked after they ran, in the folder of its last command
    "examples/relu_attention/README.md": relu_example_says_true,
}


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_documents_commands_run_as_written(document, workspace):
    said, failures = {}, []
    cwd = None
    for cmd in (c for c in COMMANDS if c.file == document):
        if PLAN[cmd]:
            continue
        cwd = folder_of_mixer(workspace, cmd) or cwd or workspace  # else where the document's last command ran
        proc, cwd = run_command(cmd, cwd, workspace)
        said[cmd.text] = proc
        if proc.returncode != 0:
            failures.append(
                f"{cmd.where} {cmd.text}: exit {proc.returncode}\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}"
            )
    assert not failures, "\n\n".join(failures)
    if document in CLAIMS:
        CLAIMS[document](cwd, said)
