"""A run's identity: what ran. Its method settings (:func:`attnexp.settings.method`) and the config-group options
that name them, the code it imported (every source file of attnexp, and the user's modules: a mixer and the helpers it
imports) and the data it read (files by size and hash; generated data by its settings). Two runs of one identity and
seed ran the same computation; runs whose code or data differ are different configurations, never seeds of one. Each
part is in ``metrics.json``, so a comparison can say what differs and leave tuned keys out (:func:`key`). No torch.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from attnexp.settings import method

SCHEMA = 2  # metrics.json's layout: records of another schema are refused by comparisons, never guessed at
DIGITS = 12  # hex digits of an identity and of each file hash
# config groups whose option names no method: where files go, what is shown, the device, saved combinations (their
# settings count, not their names)
NOT_CHOSEN = ("hydra", "logger", "callbacks", "paths", "trainer", "experiment", "hparams_search")
PACKAGE = Path(__file__).resolve().parent  # attnexp/


def digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGITS]


def method_choices(choices: Mapping[str, Any]) -> dict[str, str]:
    """The config-group options that name a method (``model: dot``, ``data: mnist``, ``module/scheduler: cosine``)."""
    return {
        str(g): str(o)
        for g, o in choices.items()
        if o is not None and str(o) != "null" and str(g).split("/")[0] not in NOT_CHOSEN
    }


def key(
    choices: Mapping[str, Any], config: Mapping[str, Any], code_id: str, data_id: str, ignore: Iterable[str] = ()
) -> str:
    """The identity of a configuration (seed aside); with ``ignore`` (tuned keys), of the configuration those keys
    leave when they are not told apart."""
    settings = method(config, ("seed", *ignore))
    return digest({"choices": method_choices(choices), "settings": settings, "code": code_id, "data": data_id})


@functools.lru_cache(maxsize=256)
def file_hash(path: str, size: int, mtime: float) -> str:
    """sha256 of a file's bytes (cached per size and modification time: a data set is read once per process)."""
    digest_ = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest_.update(block)
    return digest_.hexdigest()[:DIGITS]


def hashed(path: Path) -> str:
    stat = path.stat()
    return file_hash(str(path), stat.st_size, stat.st_mtime)


def installed_or_standard(file: Path) -> bool:
    """A file of the standard library or of an installed package (site-packages), which its version names."""
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return any(file.is_relative_to(Path(r).resolve()) for r in roots)


def module_key(name: str, file: Path) -> str:
    """A module's file named by the module, not where it lies: ``my_attention.py``, ``my_pkg/ops/__init__.py``."""
    stem = name.replace(".", "/")
    return f"{stem}/__init__.py" if file.name == "__init__.py" else f"{stem}{file.suffix}"


def user_modules(targets: Iterable[str]) -> dict[str, Path]:
    """The modules of the user's code a run imports: the top-level modules (or packages) of ``targets`` (the dotted
    paths of the classes a config names) that are neither attnexp nor installed nor standard, and every module
    imported so far from the folders they lie in (a mixer's helpers beside it)."""
    folders, found = set(), {}
    for target in targets:
        top = target.split(".")[0]
        module = sys.modules.get(top)
        file = getattr(module, "__file__", None)
        if top == "attnexp" or not file or installed_or_standard(Path(file).resolve()):
            continue
        folders.add(Path(file).resolve().parent)
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not file or name.split(".")[0] == "attnexp" or not file.endswith(".py"):
            continue
        path = Path(file).resolve()
        if path.is_file() and any(path.is_relative_to(f) for f in folders) and not installed_or_standard(path):
            found[module_key(name, path)] = path
    return found


def code(targets: Iterable[str] = ()) -> dict[str, Any]:
    """``{"id": ..., "files": {"attnexp/cli/train.py": <hash>, ..., "my_attention.py": <hash>}}``: every source file
    of attnexp and the user's modules (:func:`user_modules`; import ``targets`` first)."""
    files = {f"attnexp/{p.relative_to(PACKAGE).as_posix()}": p for p in sorted(PACKAGE.rglob("*.py"))}
    files.update(user_modules(targets))
    hashes = {name: hashed(path) for name, path in sorted(files.items()) if "__pycache__" not in path.parts}
    return {"id": digest(hashes), "files": hashes}


def dataset(files: Mapping[str, Path]) -> dict[str, Any]:
    """``{"id": ..., "files": {name: {"size": bytes, "sha256": hash}}}`` for the files a data module reads (``name``:
    where it lies under the data root, so a copy elsewhere is the same data); generated data reads none."""
    found = {name: {"size": p.stat().st_size, "sha256": hashed(p)} for name, p in sorted(files.items())}
    return {"id": digest(found), "files": found}


def differing_code(here: Mapping[str, Any], there: Mapping[str, Any]) -> list[str]:
    """The source files whose hash differs between two records' ``code`` (present in one only included)."""
    a, b = here.get("files") or {}, there.get("files") or {}
    return sorted(name for name in set(a) | set(b) if a.get(name) != b.get(name))
