"""The git commit of a checkout attnexp runs from, and whether its code differs from that commit: read from the
repository's files (HEAD, refs, the index), so no git program is needed.

Not ``git rev-parse HEAD`` and ``git status`` through :mod:`subprocess`, though they would be shorter: the package
starts no programs (``tests/unit/test_layout.py`` holds it to that), and a run records the same facts on a machine
without git."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

WATCHED = ("attnexp/", "configs/")  # the checkout's code: a change there changes what runs
SOURCES = (".py", ".yaml")


def git_dir(checkout: Path) -> Path | None:
    """The checkout's git directory: ``.git``, or the one a worktree's ``.git`` file points to."""
    dot_git = checkout / ".git"
    if dot_git.is_dir():
        return dot_git
    if dot_git.is_file() and dot_git.read_text().startswith("gitdir:"):
        found = Path(dot_git.read_text().split(":", 1)[1].strip())
        return found if found.is_absolute() else (checkout / found).resolve()
    return None


def common_dir(gitdir: Path) -> Path:
    """Where refs live: a worktree's git directory names the repository's in ``commondir``."""
    named = gitdir / "commondir"
    return (gitdir / named.read_text().strip()).resolve() if named.is_file() else gitdir


def commit(gitdir: Path) -> str | None:
    """The commit HEAD names (through its branch), or None."""
    head = (gitdir / "HEAD").read_text().strip()
    if not head.startswith("ref:"):
        return head or None
    ref = head.split(":", 1)[1].strip()
    for folder in (gitdir, common_dir(gitdir)):
        if (folder / ref).is_file():
            return (folder / ref).read_text().strip()
    packed = common_dir(gitdir) / "packed-refs"
    for line in packed.read_text().splitlines() if packed.is_file() else []:
        if line.endswith(f" {ref}") and not line.startswith("#"):
            return line.split()[0]
    return None


def index_entries(gitdir: Path) -> dict[str, str] | None:
    """Path -> blob hash of each file in the index (versions 2 and 3; None for another or none)."""
    try:
        data = (gitdir / "index").read_bytes()
    except OSError:
        return None
    signature, version, count = struct.unpack(">4sLL", data[:12])
    if signature != b"DIRC" or version not in (2, 3):
        return None
    found, at = {}, 12
    for _ in range(count):
        sha = data[at + 40 : at + 60].hex()
        flags = struct.unpack(">H", data[at + 60 : at + 62])[0]
        start = at + 62 + (2 if version == 3 and flags & 0x4000 else 0)
        end = data.index(b"\0", start)
        found[data[start:end].decode("utf-8", "replace")] = sha
        at += (end - at + 8) // 8 * 8  # entries are NUL-padded to a multiple of 8 bytes
    return found


def blob_hash(path: Path) -> str:
    content = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def modified(checkout: Path, gitdir: Path) -> bool | None:
    """Whether a file of the checkout's code (:data:`WATCHED`) differs from the index, is missing, or is new
    (sources only); None where the index cannot be read. Changes staged but not committed are not seen."""
    entries = index_entries(gitdir)
    if entries is None:
        return None
    watched = {p: sha for p, sha in entries.items() if p.startswith(WATCHED)}
    for path, sha in watched.items():
        file = checkout / path
        if not file.is_file() or blob_hash(file) != sha:
            return True
    present = {
        p.relative_to(checkout).as_posix()
        for w in WATCHED
        for p in (checkout / w).rglob("*")
        if p.suffix in SOURCES and "__pycache__" not in p.parts
    }
    return bool(present - set(watched))


def describe(checkout: Path) -> dict[str, object]:
    """``{"commit": ..., "modified": ...}`` for a git checkout, ``{}`` elsewhere."""
    gitdir = git_dir(checkout)
    if gitdir is None:
        return {}
    try:
        found = commit(gitdir)
    except OSError:
        return {}
    return {"commit": found, "modified": modified(checkout, gitdir)} if found else {}
