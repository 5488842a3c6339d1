"""Hydra's warnings in attnexp's words, by the standard library's filters: while the pre-flight stage composes a
command's config each one is an error (the config as written is one Hydra reads otherwise than it looks, or in part
not at all: a search path it skips, a defaults list it completes), refused in one paragraph; any Hydra gives later is
said as one paragraph without its source line, once for each place in Hydra's code that gives it."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attnexp.cli.typos import NOTHING
from attnexp.errors import AttnexpError

HYDRA = r"hydra(\.|$)"  # the modules a filter matches: Hydra's own, not hydra_plugins' or the user's


def hydras(filename: str) -> bool:
    """Whether a warning attributed to ``filename`` is Hydra's."""
    import hydra

    return Path(filename).resolve().is_relative_to(Path(hydra.__file__).resolve().parent)


def paragraph(message: Any) -> str:
    return " ".join(str(message).split())


@contextlib.contextmanager
def refused() -> Iterator[None]:
    """Within: a warning Hydra gives raises, and is refused in one paragraph (:class:`AttnexpError`)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", module=HYDRA)
        try:
            yield
        except Warning as warned:
            raise AttnexpError(refusal(warned)) from None


def refusal(warned: Warning) -> str:
    return (
        f"Hydra warns about the configuration: {paragraph(warned).rstrip('.')}. It would go on with a config other "
        "than the one written: fix what it names (attnexp --info searchpath shows where configs are looked for, "
        f"--info defaults what is composed). {NOTHING}"
    )


def in_a_paragraph() -> None:
    """From here to the end of the caller's ``warnings.catch_warnings()`` block: each of Hydra's warnings shown as
    ``Hydra warns: <one paragraph>`` (once per place that gives it, Python's default), through whichever way warnings
    are shown (stderr, or the run's log once ``logging.captureWarnings`` takes them); ``warnings.formatwarning`` is
    the caller's to put back."""
    warnings.filterwarnings("default", module=HYDRA)  # once per place in Hydra's code
    shown = warnings.formatwarning

    def formatwarning(message: Any, category: Any, filename: str, lineno: int, line: str | None = None) -> str:
        if hydras(filename):
            return f"Hydra warns: {paragraph(message)}\n"
        return shown(message, category, filename, lineno, line)

    warnings.formatwarning = formatwarning
