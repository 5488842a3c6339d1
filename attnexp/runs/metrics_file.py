"""``metrics.json``, the file every run folder holds: its fields, status values and the one reader and writer.

The file has a header (``mixer`` (the ``model`` choice), ``data``, ``net``, ``task``, ``seed``, ``params``,
``path``: the attention path that trained, see ``model.path``; ``batch_size`` and ``effective_batch_size`` (per
optimizer step, all devices and accumulated batches together); ``host`` and ``pid`` of the process that writes it;
from the task: ``classes``, ``summary`` (the metrics a comparison reports, as ``[name, "max" or "min"]`` pairs in
order), ``monitor`` and ``mode``), a ``status`` and, once there are some, the final metrics under their logged names
(``test/acc``), ``monitor_best`` (the tested checkpoint's value of ``monitor``), ``tested_epoch``, timings
(``wall_s``, ``fit_s``, ``epochs``, ``seconds_per_epoch``, ``train_samples_per_s``) and, for a run that did not
finish or trained or validated nothing, ``error``.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attnexp.errors import AttnexpError

FILE = "metrics.json"
# running -> trained (fit done, test to come) -> ok; or failed, diverged, interrupted, bad_input (stopped by a bad
# setting or file, exit status 2); untrained (no training batch ran) or unvalidated (no validation ran, so the test
# measured the last weights) where the run finished without the numbers a comparison needs.
RUNNING, TRAINED, OK = "running", "trained", "ok"
FAILED, DIVERGED, INTERRUPTED, BAD_INPUT = "failed", "diverged", "interrupted", "bad_input"
UNTRAINED, UNVALIDATED = "untrained", "unvalidated"
ABANDONED = "abandoned"  # never written: a record left at running or trained by a process that is gone (current_status)
STOPPED = (FAILED, DIVERGED, INTERRUPTED, BAD_INPUT)
NOT_COMPARABLE = (BAD_INPUT, UNTRAINED, UNVALIDATED)  # runs a comparison leaves out, with a note
METRIC_PREFIXES = ("train/", "val/", "test/", "attn/")


def mixer(record: Mapping[str, Any]) -> str:
    """The mixer a record names (``variant`` in files written before it was called ``mixer``)."""
    return str(record.get("mixer", record.get("variant")))


def final_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The epoch-level metrics worth keeping (``train/``, ``val/``, ``test/``, ``attn/``; no step-level ``_step``
    ones)."""
    return {k: float(v) for k, v in metrics.items() if k.startswith(METRIC_PREFIXES) and not k.endswith("_step")}


def path(folder: str | Path) -> Path:
    return Path(folder) / FILE


class DamagedRecord(AttnexpError):
    """A ``metrics.json`` that cannot be read as a record (cut short, overwritten)."""


def read(folder: str | Path) -> dict[str, Any]:
    """The record of the run in ``folder``; empty if it has none; :class:`DamagedRecord`, naming the file, if it
    cannot be read."""
    file = path(folder)
    if not file.exists():
        return {}
    try:
        found = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DamagedRecord(
            f"{file} is damaged ({type(err).__name__}: {err}); no record can be read from it."
        ) from None
    if not isinstance(found, dict):
        raise DamagedRecord(f"{file} is damaged: it holds a {type(found).__name__}, not a run's record.")
    return found


def folders(root: str | Path) -> list[Path]:
    """The run folders (holding a record) under ``root``, links followed (a sweep's folder links its jobs' runs)."""
    found = {Path(top) for top, _, files in os.walk(root, followlinks=True) if FILE in files}
    return sorted(found)


def write(folder: str | Path, record: Mapping[str, Any]) -> None:
    """Write atomically: a reader never sees half a file."""
    file = path(folder)
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, file)


def current_status(record: Mapping[str, Any], folder: str | Path) -> str:
    """The status of a run as it stands now: ``abandoned`` for a record at ``running`` or ``trained`` whose process (on
    this host) is gone, killed or crashed before it could say so; else the recorded one."""
    status = str(record.get("status", "?"))
    here = record.get("host") == socket.gethostname() and isinstance(record.get("pid"), int)
    if status in (RUNNING, TRAINED) and here and not process_alive(record["pid"], since=path(folder).stat().st_mtime):
        return ABANDONED
    return status


def process_alive(pid: int, since: float) -> bool:
    """Whether process ``pid`` runs and is the one that wrote a file at time ``since``: a process started after that
    (the number used again) is another one. Linux tells zombies and start times; elsewhere the number alone counts."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(
            float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
        )
    except (OSError, StopIteration, IndexError):
        return True
    started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat, after the name
    return fields[0] != "Z" and started <= since + 2.0  # boot time has whole seconds


def comparable(status: str) -> bool:
    """Whether a run with this status belongs in a comparison: one that did not finish is listed with its status;
    bad input, or a run that trained or validated nothing, is left out with a note."""
    return status not in NOT_COMPARABLE
