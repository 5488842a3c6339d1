"""``metrics.json``, the file every run folder holds (its fields: :mod:`attnexp.runs.record` and
docs/comparisons.md#the-run-record): the status values and the one reader and writer."""

from __future__ import annotations

import errno
import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attnexp.errors import AttnexpError, shown
from attnexp.runs import lock

FILE = "metrics.json"
# running -> trained (fit done, test to come) -> ok; or failed, diverged, interrupted, bad_input (a setting or file
# refused at run time, exit status 2); untrained (no training batch) or unvalidated (no validation: the test measured
# the last weights): finished without the numbers a comparison needs; invalid (a causal task's trained network reads
# later tokens: its numbers measure a leak, exit status 1).
RUNNING, TRAINED, OK = "running", "trained", "ok"
FAILED, DIVERGED, INTERRUPTED, BAD_INPUT = "failed", "diverged", "interrupted", "bad_input"
UNTRAINED, UNVALIDATED, INVALID = "untrained", "unvalidated", "invalid"
ABANDONED = "abandoned"  # never written: a record left at running or trained by a process that is gone
STOPPED = (FAILED, DIVERGED, INTERRUPTED, BAD_INPUT)
NOT_COMPARABLE = (BAD_INPUT, UNTRAINED, UNVALIDATED, INVALID)  # runs a comparison leaves out, with a note
METRIC_PREFIXES = ("train/", "val/", "test/", "attn/")


class DamagedRecord(AttnexpError):
    """A ``metrics.json`` that cannot be read as a record (cut short, overwritten)."""


def mixer(record: Mapping[str, Any]) -> str:
    return str(record.get("mixer"))


def final_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The epoch-level metrics worth keeping (no step-level ``_step`` ones)."""
    return {k: float(v) for k, v in metrics.items() if k.startswith(METRIC_PREFIXES) and not k.endswith("_step")}


def path(folder: str | Path) -> Path:
    return Path(folder) / FILE


def read(folder: str | Path) -> dict[str, Any]:
    """The record in ``folder``; empty without one; :class:`DamagedRecord`, naming the file, if it cannot be read."""
    file = path(folder)
    if not os.path.exists(file):  # False, not an OSError, for a name too long for the file system
        return {}
    way_out = (
        f"Restore the file from a copy, or delete the run's folder (rm -r {shown(folder)}) to train this run again "
        "from its start: its checkpoints are not continued without their record"
    )
    try:
        found = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        why = f"{type(err).__name__}: {err}"
        raise DamagedRecord(f"{shown(file)} is damaged ({why}): no record can be read. {way_out}.") from None
    if not isinstance(found, dict):
        kind = type(found).__name__
        raise DamagedRecord(f"{shown(file)} is damaged: it holds a {kind}, not a run's record. {way_out}.")
    return found


def folders(root: str | Path) -> list[Path]:
    """The run folders under ``root``, links followed (a sweep's folder links its jobs' runs)."""
    return sorted({Path(top) for top, _, files in os.walk(root, followlinks=True) if FILE in files})


def write(folder: str | Path, record: Mapping[str, Any]) -> None:
    """Write atomically, through a temporary file of this writer's own: a reader never sees half a file, and a
    failed write (a full disk) leaves the record as it was and no temporary file."""
    file = path(folder)
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp, text = file.with_name(f"{FILE}.{os.getpid()}.tmp"), json.dumps(record, indent=2, sort_keys=True) + "\n"
    try:
        tmp.write_text(text)
        os.replace(tmp, file)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        if err.errno != errno.ENOSPC or not overwritten(file, json.dumps(record, sort_keys=True) + "\n"):
            raise
    finally:
        tmp.unlink(missing_ok=True)


def overwritten(file: Path, text: str) -> bool:
    """A full disk's last word (a failure's record): ``text`` written over the old record's own blocks, which needs no
    new space, when it fits in them; False, the old record untouched, when it does not."""
    data = text.encode()
    if not file.exists() or len(data) > max(file.stat().st_size, file.stat().st_blocks * 512):
        return False
    with open(file, "r+b") as out:
        out.write(data)
        out.truncate(len(data))
    return True


def current_status(record: Mapping[str, Any], folder: str | Path) -> str:
    """The status as it stands now: ``abandoned`` for a record at ``running`` or ``trained`` whose process is gone,
    killed or crashed before it could say so (the folder's lock is free: :mod:`attnexp.runs.lock`; a folder without
    one, on this host, by the process table); else the recorded one."""
    status = str(record.get("status", "?"))
    if status not in (RUNNING, TRAINED):
        return status
    if lock.has_lock_file(folder):
        return status if lock.holder(folder) is not None else ABANDONED
    here = record.get("host") == socket.gethostname() and isinstance(record.get("pid"), int)
    if here and not process_alive(record["pid"], since=path(folder).stat().st_mtime):
        return ABANDONED
    return status


def process_alive(pid: int, since: float) -> bool:
    """Whether process ``pid`` runs and is the one that wrote a file at time ``since`` (a later process with the same
    number is another one). Linux tells zombies and start times; elsewhere the number alone counts."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        stat = Path("/proc/stat").read_text().splitlines()
        boot = next(float(line.split()[1]) for line in stat if line.startswith("btime"))
    except (OSError, StopIteration, IndexError):
        return True
    started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat, after the name
    return fields[0] != "Z" and started <= since + 2.0  # boot time has whole seconds


def comparable(status: str) -> bool:
    """Whether a run with this status belongs in a comparison (bad input, or a run that trained or validated
    nothing, is left out with a note)."""
    return status not in NOT_COMPARABLE
