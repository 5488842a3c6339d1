"""Run folders as attnexp writes them (a ``metrics.json`` of schema 2: what ran, its identity and its numbers), made
without training: the fixtures of the comparison's tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from attnexp.runs.identity import SCHEMA, digest, key

CONFIG: dict[str, Any] = {
    "seed": 0,
    "threads": None,
    "paths": {"log_dir": "outputs"},
    "data": {"_target_": "attnexp.data.DigitsDataModule", "batch_size": 64},
    "model": {"_target_": "attnexp.mixers.DotAttention", "_partial_": True, "heads": 1},
    "net": {"_target_": "attnexp.networks.PatchClassifier", "mixer": "${model}", "depth": 1},
    "module": {"optimizer": {"_target_": "torch.optim.Adam", "lr": 0.003}},
    "trainer": {"max_epochs": 5, "accelerator": "auto"},
}
CODE = {  # a few of attnexp's files, by hash: enough to tell versions of the code apart
    "attnexp/data/digits.py": "3f2a11111111",
    "attnexp/mixers/dot.py": "804452aa4810",
    "attnexp/training/module.py": "5c0d33333333",
}
SUMMARIES = {
    "image_classification": [["test/acc", "max"], ["val/acc_best", "max"], ["test/loss", "min"]],
    "next_token": [["test/ppl", "min"], ["val/loss", "min"], ["test/acc", "max"]],
    "answer_tokens": [["test/acc", "max"], ["val/acc_best", "max"]],
}
TASKS = {"digits": "image_classification", "corpus": "next_token", "mqar": "answer_tokens", "recall": "answer_tokens"}


def record(
    root: Path,
    name: str,
    mixer: str = "dot",
    seed: int = 0,
    acc: float | None = 0.5,
    *,
    data: str = "digits",
    overrides: list[str] | None = None,
    changes: dict[str, Any] | None = None,
    code: dict[str, str] | None = None,
    chosen: dict[str, str] | None = None,
    **fields: Any,
) -> Path:
    """A finished run folder ``root / name``: ``mixer`` on ``data`` with ``seed``, its command line ``model=<mixer>
    seed=<seed>`` plus ``overrides``, its config changed by ``changes`` (dotted keys), its code's files by ``code``
    (a user's mixer module included), more config-group options ``chosen``, and ``acc`` as its test and best
    validation accuracy (with a test loss of 1 - acc); ``fields`` add to or replace the record's."""
    config = copy.deepcopy(CONFIG) | {"seed": seed}
    config["data"]["_target_"] = f"attnexp.data.{data}"
    if mixer != "dot":
        config["model"] = {"_target_": f"{mixer}_attention.Mixer", "_partial_": True, "heads": 1}
    for dotted, value in (changes or {}).items():
        node = config
        *path, leaf = dotted.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    files = {**CODE, **(code or {})}
    task = TASKS.get(data, "image_classification")
    choices = {"model": mixer, "data": data, "task": task, "net": "patch", "trainer": "default", "paths": "default"}
    choices |= chosen or {}
    code_id, data_id = digest(files), digest({"data": data})
    metrics = {} if acc is None else {"test/acc": acc, "val/acc_best": acc, "test/loss": 1 - acc, "monitor_best": acc}
    fields = {
        "schema": SCHEMA,
        "status": "ok",
        "mixer": mixer,
        "data": data,
        "task": task,
        "seed": seed,
        "params": 100,
        "classes": 10,
        "epochs": config["trainer"].get("max_epochs", 5),
        "summary": SUMMARIES[task],
        "monitor": "val/loss" if task == "next_token" else "val/acc",
        "mode": "min" if task == "next_token" else "max",
        "examples": {"val": 2000, "test": 2000},
        "scored": {"val": {"acc": 2000}, "test": {"acc": 2000}},
        "overrides": [f"model={mixer}", *(overrides or []), f"seed={seed}"],
        "choices": choices,
        "config": config,
        "code": {"id": code_id, "files": files},
        "dataset": {"id": data_id, "files": {}},
        "identity": key(choices, config, code_id, data_id),
        **metrics,
        **fields,
    }
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps(fields))
    return folder
