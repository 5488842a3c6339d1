"""Where in code a value or an error comes from: the frames of a call, and the line to point a user at (their own
code before attnexp's, an installed package's or torch's), named as a user would type the file. Below the mixer
contract and the faults and tracing that use it."""

from __future__ import annotations

import sysconfig
from pathlib import Path
from types import FrameType
from typing import NamedTuple

import torch

# Frames in these folders are torch's or Python's own: the line to point at is the last one outside them.
LIBRARIES = (Path(torch.__file__).parent, Path(sysconfig.get_paths()["stdlib"]))
PACKAGE = Path(__file__).resolve().parents[1]  # attnexp/: a line of the user's code is preferred to one of attnexp's
INSTALLED = tuple({Path(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")})  # and to an installed helper's


class Origin(NamedTuple):
    """The mixer an error was raised in, the line that raised it, and whether the mixer was being built."""

    mixer: str  # its class
    file: str
    line: int
    function: str
    building: bool = False

    def __str__(self) -> str:
        return f"{self.mixer}, at {self.file}:{self.line} in {self.function}"


def origin(frames: list[tuple[FrameType, int]], mixer: str, building: bool = False) -> Origin:
    """The innermost of ``frames`` in the user's code (not attnexp's, nor an installed package's, as einops); else
    the innermost outside attnexp, torch and the standard library; else outside the last two; the first when all are
    inside them."""
    inside = [(f, line) for f, line in frames if not in_library(Path(f.f_code.co_filename))]
    others = [(f, line) for f, line in inside if not in_package(Path(f.f_code.co_filename))]
    users = [(f, line) for f, line in others if not under(Path(f.f_code.co_filename), INSTALLED)]
    frame, line = (users or others or inside or frames[:1])[-1]
    return Origin(mixer, shown(Path(frame.f_code.co_filename)), line, frame.f_code.co_name, building)


def owner(frame: FrameType) -> object:
    """The object a frame's method runs on (its ``self``), or None."""
    return frame.f_locals.get("self")


def in_library(path: Path) -> bool:
    return under(path, LIBRARIES)


def under(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


def in_package(path: Path) -> bool:
    """Whether a file is attnexp's own, not the user's."""
    return (path if path.is_absolute() else Path.cwd() / path).resolve().is_relative_to(PACKAGE)


def shown(path: Path) -> str:
    """``path`` relative to the working directory when inside it, as a user would type it."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)
