"""One command's hold on the process that runs it. What a command changes in its process (the working folder and
arguments, the environment, ``sys.path`` and the user's modules, signal handlers, logging and warnings, the random
generators, torch's threads and switches, Hydra's singletons, the runs' caches and locks) is put back when it returns,
so a second command in the same process (a notebook, a script that runs several configurations, the tests) gets what
a fresh process would: an edited mixer is read and imported again, a changed setting finds its own folder."""

from __future__ import annotations

import contextlib
import importlib
import linecache
import logging
import os
import random
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnexp.cli import console, hydra_warnings
from attnexp.runs import data as data_of_run
from attnexp.runs import folders, identity, lock, provenance
from attnexp.training import stop_request

PACKAGE = Path(__file__).resolve().parents[1]  # attnexp's own modules stay imported: their files are not the user's


@dataclass
class Command:
    """A command running in this process, and what it gave: the run folders it trained or found finished, the sweep
    folders it made, the result its Python entry hands back (``attnexp.check``, ``compare``, ``predict``), the
    paragraph it refused its input with. A command another runs (the console script inside ``attnexp.run``) gives to
    both."""

    name: str
    runs: list[Path] = field(default_factory=list)
    sweeps: list[Path] = field(default_factory=list)
    result: Any = None
    error: str = ""
    workers: bool = False  # whether joblib started worker processes for its sweep's jobs


RUNNING: list[Command] = []  # the commands this process runs, the innermost last (a command's only while it runs)


def note_run(folder: str | Path) -> None:
    """The running commands train, or found finished, the run of ``folder``."""
    for command in RUNNING:
        if Path(folder) not in command.runs:
            command.runs.append(Path(folder))


def note_sweep(folder: str | Path, launcher: str) -> None:
    """The running commands made the sweep ``folder``, whose jobs ``launcher`` (its class) runs."""
    for command in RUNNING:
        command.sweeps.append(Path(folder))
        command.workers |= launcher.endswith("JoblibLauncher")


def note_result(result: Any) -> None:
    for command in RUNNING:
        command.result = result


def refuse(paragraph: str) -> None:
    """The running commands refuse their input with ``paragraph``, which the user reads on stderr."""
    for command in RUNNING:
        command.error = paragraph
    print(paragraph, file=sys.stderr)


@contextlib.contextmanager
def held(name: str, argv: list[str] | None = None) -> Iterator[Command]:
    """Run a command (``argv``: its ``sys.argv``, else this process's) with everything it may change in the process
    saved before and put back after, and the runs' caches empty on both sides."""
    saved = Saved()
    command = Command(name)
    if argv is not None:
        sys.argv[:] = argv
    forget()
    importlib.invalidate_caches()  # a module file written since the last command is found
    linecache.clearcache()  # and an edited one is quoted as it is now
    RUNNING.append(command)
    try:
        threading.excepthook = console.quiet_on_full_disk(saved.excepthook)
        with warnings.catch_warnings():
            hydra_warnings.in_a_paragraph()
            try:
                yield command
            finally:
                if warnings.showwarning is not saved.showwarning:  # logging.captureWarnings(True) during the command
                    logging.captureWarnings(False)
                warnings.formatwarning = saved.formatwarning
    finally:
        RUNNING.remove(command)
        if command.workers:  # a fresh process starts its own, in this command's folder and environment
            from joblib.externals.loky import get_reusable_executor

            get_reusable_executor().shutdown(wait=True)
        forget()
        lock.release_all(keep=saved.locks)
        stop_request.clear()
        saved.restore()


def forget() -> None:
    """The caches a command keeps of runs: identities and the data read for them, the software and library folders."""
    folders.forget()
    data_of_run.forget()
    provenance.software.cache_clear()
    identity.library_roots.cache_clear()


class Saved:
    """The process state a command may change, as it was before the command."""

    def __init__(self) -> None:
        self.cwd, self.argv, self.path = os.getcwd(), list(sys.argv), list(sys.path)
        self.environ = dict(os.environ)
        self.users = users_modules()  # hidden while it runs
        for name in self.users:
            del sys.modules[name]
        self.modules = set(sys.modules)
        self.showwarning, self.formatwarning = warnings.showwarning, warnings.formatwarning
        self.excepthook = threading.excepthook
        self.locks = lock.held()
        self.signals = signal_handlers()
        self.loggers = logger_states()
        self.random = random.getstate()
        self.numpy = sys.modules["numpy"].random.get_state() if "numpy" in sys.modules else None
        self.torch = torch_state()
        self.hydra = hydra_state()

    def restore(self) -> None:
        os.chdir(self.cwd)
        threading.excepthook = self.excepthook
        sys.argv[:], sys.path[:] = self.argv, self.path
        for name in users_modules().keys() - self.modules:
            del sys.modules[name]
        sys.modules.update(self.users)
        restore_torch(self.torch, self.environ)
        os.environ.clear()
        os.environ.update(self.environ)
        for signum, handler in self.signals.items():
            if signal.getsignal(signum) is not handler:
                signal.signal(signum, handler)
        restore_loggers(self.loggers)
        random.setstate(self.random)
        if self.numpy is not None:
            sys.modules["numpy"].random.set_state(self.numpy)
        restore_hydra(self.hydra)


def signal_handlers() -> dict[int, Any]:
    """The Python handler of every signal that has one (only the main thread may set them)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    uncatchable = {signal.SIGKILL, signal.SIGSTOP}
    found = {s: signal.getsignal(s) for s in signal.valid_signals() if s not in uncatchable}
    return {s: h for s, h in found.items() if h is not None}


def logger_states() -> dict[str, tuple[Any, ...]]:
    """Each logger's handlers, level, propagation, filters and switch (the root's under "")."""
    loggers = {"": logging.getLogger()}
    loggers.update((n, g) for n, g in logging.Logger.manager.loggerDict.items() if isinstance(g, logging.Logger))
    return {n: (list(g.handlers), g.level, g.propagate, list(g.filters), g.disabled) for n, g in loggers.items()}


def restore_loggers(before: dict[str, tuple[Any, ...]]) -> None:
    """Loggers as they were; a handler the command added (the run's train.log, a console on its output) is closed."""
    now = logging.Logger.manager.loggerDict
    loggers = {"": logging.getLogger(), **{n: g for n, g in now.items() if isinstance(g, logging.Logger)}}
    kept = {id(h) for state in before.values() for h in state[0]}
    for name, logger in loggers.items():
        for handler in logger.handlers:
            if id(handler) not in kept:
                handler.close()
        if name in before:
            handlers, level, propagate, filters, disabled = before[name]
            logger.handlers[:], logger.filters[:] = handlers, filters
            logger.level, logger.propagate, logger.disabled = level, propagate, disabled
        else:  # a logger the command made (a library it imported first): it keeps its settings, not the run's files
            logger.handlers[:] = [h for h in logger.handlers if id(h) in kept]


def users_modules() -> dict[str, Any]:
    """The modules imported from the user's files (a mixer of one's own, a notebook's helper), not a library's or
    attnexp's: a command imports its own copies, as a fresh process would, and forgets them when it returns; the
    caller's stay the caller's."""
    known = (str(PACKAGE), *map(str, identity.library_roots(tuple(sys.path))))
    prefixes = tuple(f"{root}{os.sep}" for root in known)
    return {n: m for n, m in list(sys.modules.items()) if users_module(n, m, prefixes)}


def users_module(name: str, module: Any, prefixes: tuple[str, ...]) -> bool:
    """Whether ``module`` is the user's (``prefixes``: the folders of attnexp and the libraries, as strings)."""
    file = getattr(module, "__file__", None)
    if not file or name in ("__main__", "__mp_main__") or file.startswith(prefixes):  # most: no file system call
        return False
    path = Path(file).resolve()
    return not path.is_relative_to(PACKAGE) and not identity.installed_or_standard(path)


def torch_state() -> dict[str, Any] | None:
    """torch's switches a run sets (threads, determinism, cuDNN, matmul precision) and its random state; None before
    torch is imported."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return {
        "threads": torch.get_num_threads(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "matmul": torch.get_float32_matmul_precision(),
        "rng": torch.random.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
    }


def restore_torch(state: dict[str, Any] | None, environ: dict[str, str]) -> None:
    """torch's switches as before the command; where the command imported torch, as a fresh import sets them (its
    threads from ``OMP_NUM_THREADS`` of ``environ``, else the cores this process may use). Compiled graphs are
    dropped: a fresh process compiles anew."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    if state is None:
        threads = environ.get("OMP_NUM_THREADS", "")
        state = {
            "threads": int(threads) if threads.isdigit() and int(threads) > 0 else len(os.sched_getaffinity(0)),
            "deterministic": False,
            "warn_only": False,
            "benchmark": False,
            "cudnn_deterministic": False,
            "matmul": "highest",
        }
    torch.set_num_threads(state["threads"])
    torch.use_deterministic_algorithms(state["deterministic"], warn_only=state["warn_only"])
    torch.backends.cudnn.benchmark = state["benchmark"]
    torch.backends.cudnn.deterministic = state["cudnn_deterministic"]
    torch.set_float32_matmul_precision(state["matmul"])
    if "rng" in state:
        torch.random.set_rng_state(state["rng"])
    if state.get("cuda_rng") is not None:
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    torch.compiler.reset()


def hydra_state() -> Any:
    """Hydra's singletons (its global config, the config store, the resolvers), as Hydra's own tests save them."""
    from hydra.core.singleton import Singleton

    return Singleton.get_state()


def restore_hydra(state: Any) -> None:
    from hydra.core.singleton import Singleton

    from attnexp.cli import search_path

    Singleton.set_state(state)  # which makes Hydra's plugins anew: attnexp's search-path plugin is registered again
    search_path.register()
