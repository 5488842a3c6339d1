"""The commands the documentation shows: every command line in a code block of README.md, examples/ and docs/ (an
indented block or a fenced one), as a user would copy it, with the file and line it is on; and every Python program
it shows (a fenced ``python`` block), whole."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import NamedTuple

from helpers import REPO

PROGRAMS = ("attnexp", "attnexp-check", "attnexp-compare", "attnexp-predict", "pip", "pytest", "python", "tensorboard")
DOCUMENTS = ("README.md", "examples/*/README.md", "examples/README.md", "docs/*.md")


class Command(NamedTuple):
    file: str  # relative to the repository: docs/vision.md
    line: int
    text: str  # as written, continuation lines joined, the shell comment dropped
    words: tuple[str, ...]  # the shell's words: environment assignments first, then the program and its arguments

    @property
    def program(self) -> str:
        return next(w for w in self.words if "=" not in w or w.startswith("-"))

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def code_lines(text: str) -> list[tuple[int, str]]:
    """The lines of a Markdown file's code blocks (fenced, or indented by four spaces after a blank line), numbered."""
    found, fenced, indented, previous = [], False, False, ""
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            found.append((number, line.strip()))
        elif line.startswith("    ") and (indented or not previous.strip()):
            indented = True
            found.append((number, line.strip()))
        elif line.strip():
            indented = False
        previous = line
    return found


def commands_in(path: Path) -> list[Command]:
    """The command lines of one document."""
    found, pending = [], None
    for number, line in code_lines(path.read_text()):
        if pending is not None:
            start, text = pending
            line = f"{text} {line}"
        else:
            start = number
        if line.endswith("\\"):
            pending = (start, line[:-1].rstrip())
            continue
        pending = None
        try:
            words = tuple(shlex.split(line, comments=True))
        except ValueError:
            continue
        for part in split_at(words, "&&"):  # pip install -e . && attnexp ...: two commands
            program = next((w for w in part if not re.fullmatch(r"[A-Z_]+=\S*", w)), "")
            if program in PROGRAMS or program == "cd":
                found.append(Command(path.relative_to(REPO).as_posix(), start, shlex.join(part), part))
    return found


def split_at(words: tuple[str, ...], separator: str) -> list[tuple[str, ...]]:
    parts: list[list[str]] = [[]]
    for word in words:
        if word == separator:
            parts.append([])
        else:
            parts[-1].append(word)
    return [tuple(p) for p in parts if p]


def documented() -> list[Command]:
    """Every documented command, in the order of the documents."""
    paths = sorted({p for pattern in DOCUMENTS for p in REPO.glob(pattern)}, key=lambda p: (p.name != "README.md", p))
    return [c for p in paths for c in commands_in(p)]


class Program(NamedTuple):
    """A fenced ``python`` block of a document: a program a reader can copy and run, or a sketch (a body left as
    ``...``)."""

    file: str
    line: int  # of its first line of code
    text: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def sketch(self) -> bool:
        return any(line.strip() == "..." for line in self.text.splitlines())


def programs_in(path: Path) -> list[Program]:
    """The fenced ``python`` blocks of one document."""
    found, lines, start = [], None, 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fence = line.strip()
        if lines is None and fence.startswith("```") and fence[3:].split()[:1] == ["python"]:
            lines, start = [], number + 1
        elif lines is not None and fence.startswith("```"):
            found.append(Program(path.relative_to(REPO).as_posix(), start, "\n".join(lines) + "\n"))
            lines = None
        elif lines is not None:
            lines.append(line)
    return found


def programs() -> list[Program]:
    """Every Python block of the documents, in their order."""
    paths = sorted({p for pattern in DOCUMENTS for p in REPO.glob(pattern)}, key=lambda p: (p.name != "README.md", p))
    return [b for p in paths for b in programs_in(p)]
