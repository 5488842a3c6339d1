"""``metrics.json``, the file every run folder holds: its fields, status values and the one reader and writer.

The file has a header (``mixer`` (the ``model`` choice), ``data``, ``net``, ``task``, ``seed``, ``params``,
``path``: the attention path that trained, see ``model.path``; from the task: ``classes``, ``summary`` (the metrics a comparison reports, as ``[name, "max" or "min"]`` pairs in order), ``monitor``
and ``mode``), a ``status`` and, once there are some, the final metrics under their logged names
(``test/acc``), ``monitor_best`` (the tested checkpoint's value of ``monitor``), timings (``wall_s``,
``fit_s``, ``epochs``, ``seconds_per_epoch``, ``train_samples_per_s``) and, for a run that did not
finish, ``error``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FILE = "metrics.json"
# running -> trained (fit done, test to come) -> ok; or failed, diverged, interrupted
RUNNING, TRAINED, OK = "running", "trained", "ok"
FAILED, DIVERGED, INTERRUPTED = "failed", "diverged", "interrupted"
STOPPED = (FAILED, DIVERGED, INTERRUPTED)
METRIC_PREFIXES = ("train/", "val/", "test/", "attn/")


def header(choices: Mapping[str, Any], seed: Any, params: int | None = None) -> dict[str, Any]:
    """The fields that say what ran: the config-group choices (``model`` as ``mixer``) and the seed."""
    fields = {"mixer": choices.get("model"), "data": choices.get("data"), "net": choices.get("net"),
              "task": choices.get("task"), "seed": seed}
    return fields if params is None else {"params": params, **fields}


def mixer(record: Mapping[str, Any]) -> str:
    """The mixer a record names (``variant`` in files written before it was called ``mixer``)."""
    return str(record.get("mixer", record.get("variant")))


def final_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The epoch-level metrics worth keeping (``train/``, ``val/``, ``test/``, ``attn/``; no step-level ``_step`` ones)."""
    return {k: float(v) for k, v in metrics.items() if k.startswith(METRIC_PREFIXES) and not k.endswith("_step")}


def path(folder: str | Path) -> Path:
    return Path(folder) / FILE


def read(folder: str | Path) -> dict[str, Any]:
    """The record of the run in ``folder``; empty if it has none."""
    file = path(folder)
    return json.loads(file.read_text()) if file.exists() else {}


def write(folder: str | Path, record: Mapping[str, Any]) -> None:
    """Write atomically: a reader never sees half a file."""
    file = path(folder)
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, file)
