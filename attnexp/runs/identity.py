"""A run's identity: what ran. Its method settings (:func:`attnexp.runs.settings.method`) and the config-group options
that name them, the code it imported (every source file of attnexp, and the user's modules: a mixer and the helpers it
imports) and the data it read (files by size and hash; generated data by its settings). Two runs of one identity and
seed ran the same computation; runs whose code or data differ are different configurations, never seeds of one. Each
part is in ``metrics.json``, so a comparison can say what differs and leave tuned keys out (:func:`key`). No torch.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from attnexp.runs.settings import method

SCHEMA = 2  # metrics.json's layout: records of another schema are refused by comparisons, never guessed at
DIGITS = 12  # hex digits of an identity and of each file hash
# config groups whose option names no method: where files go, what is shown, the device, saved combinations (their
# settings count, not their names)
NOT_CHOSEN = ("hydra", "logger", "callbacks", "paths", "trainer", "experiment", "hparams_search")
PACKAGE = Path(__file__).resolve().parents[1]  # attnexp/


def other_schema(record: Mapping[str, Any]) -> tuple[str, str] | None:
    """What a record of another schema than :data:`SCHEMA` is, and what to do to use it: ``(what, fix)``; None for a
    record of ours. A higher schema is a newer attnexp's, which this one cannot read."""
    found = record.get("schema")
    if found == SCHEMA and isinstance(record.get("config"), dict):
        return None
    shown = f"a record of schema {'none' if found is None else found}, not {SCHEMA}"
    if isinstance(found, int) and found > SCHEMA:
        return f"{shown} (written by a newer attnexp): this attnexp cannot tell what it says", "upgrade attnexp"
    what = "it does not say all of the settings, code and data that ran"
    return f"{shown} (written by an earlier attnexp): {what}", "run it again with this attnexp"


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


@functools.cache
def library_roots(path: tuple[str, ...]) -> tuple[Path, ...]:
    """The folders of the standard library and of installed packages: this interpreter's, and every folder on
    ``path`` (``sys.path``) that holds an installed distribution's ``.dist-info`` (site-packages reached through
    ``--system-site-packages`` or a ``.pth`` file, the user's site, a ``pip --target`` folder). A package installed in
    editable mode keeps its metadata there and its source in the user's folder, which stays the user's code."""
    roots = {Path(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.update(Path(p) for p in path if p and Path(p).is_dir() and next(Path(p).glob("*.dist-info"), None))
    return tuple(dict.fromkeys(r.resolve() for r in roots))


def installed_or_standard(file: Path) -> bool:
    """A file of the standard library or of an installed package, which its version names."""
    return any(file.is_relative_to(root) for root in library_roots(tuple(sys.path)))


def module_key(name: str, file: Path) -> str:
    """A module's file named by the module, not where it lies: ``my_attention.py``, ``my_pkg/ops/__init__.py``."""
    stem = name.replace(".", "/")
    return f"{stem}/__init__.py" if file.name == "__init__.py" else f"{stem}{file.suffix}"


def user_folders(searchpath: Iterable[str], cwd: Path) -> list[Path]:
    """The folders a user's modules are imported from (:mod:`attnexp.cli.search_path` puts them on ``sys.path``): the
    one holding each ``configs/`` folder of ``hydra.searchpath`` (``file://`` entries), and ``cwd`` where it holds a
    ``configs/`` folder that is not attnexp's own."""
    from attnexp import config_dir

    found = [Path(p.removeprefix("file://")).resolve().parent for p in searchpath if str(p).startswith("file://")]
    if (cwd / "configs").is_dir() and (cwd / "configs").resolve() != config_dir().resolve():
        found.insert(0, cwd.resolve())
    return list(dict.fromkeys(found))


def module_file(name: str, roots: Iterable[Path]) -> Path | None:
    """The source file of module ``name`` (``pkg.sub``) under the first of ``roots`` that holds it, found the way
    Python's path finder lays modules out, without importing anything."""
    for root in roots:
        base = root.joinpath(*name.split("."))
        for file in (base.with_suffix(".py"), base / "__init__.py"):
            if file.is_file():
                return file.resolve()
    return None


def imported_names(file: Path, name: str) -> set[str]:
    """The modules a source file imports, anywhere in it (inside functions too), relative imports resolved against
    ``name`` (the module it is); ``from a import b`` also names ``a.b``, which may be a module."""
    package = name if file.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    try:
        tree = ast.parse(file.read_text(), str(file))
    except (SyntaxError, UnicodeDecodeError, OSError):
        return found
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".") if package else []
            base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def user_modules(targets: Iterable[str], folders: Iterable[Path] = ()) -> dict[str, Path]:
    """The modules of the user's code a run imports, read from the files: the module of each of ``targets`` (the
    dotted paths of the classes a config names) that is neither attnexp nor installed nor standard, found in
    ``folders`` or on ``sys.path``, and every module those import, at any depth and inside functions too, that lies in
    the same folders (a helper a mixer imports in a method counts; another job's mixer does not)."""
    roots = [*folders, *(Path(p) for p in sys.path if p and Path(p).is_dir())]
    queue: list[tuple[str, Path]] = []
    homes: set[Path] = set()
    for target in targets:
        parts = target.split(".")
        for cut in range(len(parts), 0, -1):  # the longest prefix that is a module: my_pkg.attention.Mine
            file = module_file(".".join(parts[:cut]), roots)
            if file is not None:
                break
        if parts[0] == "attnexp" or file is None or installed_or_standard(file):
            continue
        homes.add(file.parents[cut - 1] if file.name != "__init__.py" else file.parents[cut])
        queue.append((".".join(parts[:cut]), file))
    found: dict[str, Path] = {}
    while queue:
        name, file = queue.pop()
        if module_key(name, file) in found:
            continue
        found[module_key(name, file)] = file
        for imported in sorted(imported_names(file, name)):
            top_file = module_file(imported, sorted(homes))
            if top_file is not None and imported.split(".")[0] != "attnexp":
                queue.append((imported, top_file))
    return found


def code(targets: Iterable[str] = (), folders: Iterable[Path] = ()) -> dict[str, Any]:
    """``{"id": ..., "files": {"attnexp/cli/train.py": <hash>, ..., "my_attention.py": <hash>}}``: every source file
    of attnexp and the user's modules (:func:`user_modules`, found in ``folders`` or on ``sys.path``)."""
    files = {f"attnexp/{p.relative_to(PACKAGE).as_posix()}": p for p in sorted(PACKAGE.rglob("*.py"))}
    files.update(user_modules(targets, folders))
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
