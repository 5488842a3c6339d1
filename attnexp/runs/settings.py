"""A run's settings as its record, its identity and comparisons see them: the composed config resolved
(:func:`config_record`), and the method (:func:`method`): the keys that cannot change what is computed left out.

Two runs with the same method ran the same settings, however they were typed: an override equal to the default is the
default, an option that only says where files go, how much is printed or how fast it runs (:data:`NOT_METHOD`) does
not count, and two spellings of one value are one. Reads the config only: no torch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

# Keys (and the nodes under them) that cannot change what a run computes, left out of a run's identity.
NOT_METHOD = (
    "seed",  # the replicate: runs of one configuration differ by it
    "threads",
    "resume",
    "test",
    "compare",
    "optimized_metric",  # speed, continuing, testing, summaries, searches
    "paths",
    "logger",  # where files go, what is written
    "callbacks.progress_bar",
    "callbacks.model_summary",
    "callbacks.epoch_lines",
    "callbacks.metrics_file",
    "callbacks.tensorboard_hparams",
    "callbacks.telemetry",
    "callbacks.figures",
    "callbacks.causality",
    "callbacks.checkpoint.dirpath",
    "callbacks.checkpoint.filename",
    "callbacks.checkpoint.auto_insert_metric_name",
    "callbacks.checkpoint.save_last",
    "callbacks.checkpoint.save_top_k",  # how many checkpoints are kept: the best one is the same
    "callbacks.checkpoint.verbose",  # attnexp's own: what is shown and kept
    "trainer.default_root_dir",
    "trainer.accelerator",
    "trainer.deterministic",
    "trainer.enable_progress_bar",
    "trainer.enable_model_summary",
    "trainer.enable_checkpointing",
    "trainer.log_every_n_steps",
    "trainer.num_sanity_val_steps",
    "trainer.profiler",  # where it runs (recorded as the device), what is shown
    "module.compile",
    "module.divergence_check_every",  # speed
    "module.steps_per_call",
    "module.log_every_n_steps",  # speed and display keys that records of earlier versions hold
    "data.root",
    "data.download",
    "data.eval_batch_size",
    "data.num_workers",  # where data lives, evaluation batching
    "task.num_attention",
    "task.num_predictions",
    "task.max_tokens",
    "task.top_k",
    "task.num_examples",  # figures
)
BUDGET = ("trainer.max_epochs", "trainer.max_steps", "trainer.max_time", "trainer.limit_train_batches")
REFERENCE = re.compile(r"\$\{([^${}]*)\}")


def left_out(key: str, keys: Iterable[str]) -> bool:
    """Whether ``key`` is one of ``keys`` or lies under one of them (``paths.log_dir`` under ``paths``)."""
    return any(key == k or key.startswith(f"{k}.") for k in keys)


def config_record(cfg: DictConfig, leave_out: Iterable[str] = ()) -> dict[str, Any]:
    """``cfg`` as plain values, resolved, keys in ``leave_out`` (and Hydra's node) dropped. A value that points at
    a whole node
    (``net.mixer: ${model}``), or a setting's value that points at a location (``${paths.data_dir}/input.txt``),
    stays as written: the node is recorded where it lives, and a location is no setting. A value that cannot be
    resolved stays as written too."""
    skipped = (*leave_out, "hydra")  # Hydra's own node, where a config has it, is no setting of the run
    return walk(cfg, OmegaConf.to_container(cfg, resolve=False), "", skipped)


def walk(cfg: DictConfig, raw: Any, where: str, skipped: tuple[str, ...]) -> Any:
    if isinstance(raw, dict):
        found = {}
        for key, value in raw.items():
            full = f"{where}.{key}" if where else str(key)
            if not left_out(full, skipped):
                found[str(key)] = walk(cfg, value, full, skipped)
        return found
    if isinstance(raw, list):
        if not any(isinstance(v, str) and "${" in v for v in raw):
            return [walk(cfg, v, f"{where}.{i}", skipped) for i, v in enumerate(raw)]
        return resolved(cfg, where, str(raw))
    if isinstance(raw, str) and "${" in raw:
        setting = not left_out(where, NOT_METHOD)  # locations are kept as written in settings only
        return raw if kept_as_written(cfg, raw, setting) else resolved(cfg, where, raw)
    return raw


def kept_as_written(cfg: DictConfig, text: str, setting: bool = True) -> bool:
    """An interpolation that is one reference to a whole node, or, in a ``setting`` (a key that can change the
    method), one that names a location (``paths``, Hydra's runtime)."""
    references = REFERENCE.findall(text)
    named = [arg.strip() for ref in references for arg in re.split(r"[:,]", ref)]
    located = any(ref.startswith("hydra:") for ref in references) or any(left_out(n, ("paths", "hydra")) for n in named)
    if setting and located:
        return True
    whole = re.fullmatch(r"\$\{([\w.]+)\}", text)
    try:
        return whole is not None and isinstance(
            OmegaConf.select(cfg, whole.group(1), default=None), (DictConfig, ListConfig)
        )
    except Exception:  # a location known only once Hydra runs the job (its output folder)
        return True


def resolved(cfg: DictConfig, key: str, raw: str) -> Any:
    try:
        value = OmegaConf.select(cfg, key, throw_on_missing=True)
    except Exception:  # an interpolation that cannot be resolved here: recorded as written
        return raw
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value


# Lightning's spellings of one precision (its docs: ``32`` is ``32-true``, ``16`` is ``16-mixed``, ...)
PRECISIONS = {"32": "32-true", "64": "64-true", "16": "16-mixed", "bf16": "bf16-mixed", "transformer-engine": "te"}


def method(config: Mapping[str, Any], ignore: Iterable[str] = ()) -> dict[str, Any]:
    """A recorded config (:func:`config_record`) without the keys that cannot change the method, nor ``ignore``;
    equal values spelt alike (``trainer.precision``: ``32`` is ``32-true``; one node is a record without the key)."""
    skipped = (*NOT_METHOD, *ignore)

    def keep(node: Any, where: str) -> Any:
        if not isinstance(node, Mapping):
            return node
        return {
            k: keep(v, f"{where}.{k}" if where else k)
            for k, v in node.items()
            if not left_out(f"{where}.{k}" if where else k, skipped)
        }

    found = keep(config, "")
    trainer = found.get("trainer")
    if isinstance(trainer, dict) and trainer.get("precision") is not None:
        found["trainer"] = {
            **trainer,
            "precision": PRECISIONS.get(str(trainer["precision"]), str(trainer["precision"])),
        }
    if isinstance(trainer, dict) and trainer.get("num_nodes") == 1:  # one node: what a config without the key runs
        found["trainer"] = {k: v for k, v in found["trainer"].items() if k != "num_nodes"}
    return found


def leaves(node: Any, where: str = "") -> Iterator[tuple[str, Any]]:
    """The config walker: every leaf of a nested config (a dict or a DictConfig) with its dotted key,
    ``("module.optimizer.lr", 0.003)``, an empty node being a leaf; a DictConfig's interpolations are left out (the
    node they name holds the value). A key may be an int (``+data.w={0:1.0}``): looked up as it is, named as text."""
    if isinstance(node, Mapping) and node:
        for key in node:
            if not (isinstance(node, DictConfig) and OmegaConf.is_interpolation(node, key)):
                yield from leaves(node[key], f"{where}.{key!s}" if where else str(key))
    elif where:
        yield where, node


def targets(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every ``_target_`` under ``node`` (a plain container: the classes, and so the modules, a run imports) with the
    config key that holds it (``model``, ``callbacks.checkpoint``, ``x[0]``); one written with an interpolation names
    no class yet."""
    if isinstance(node, dict):
        target = node.get("_target_")
        if isinstance(target, str) and "${" not in target:
            yield where, target
        for key, value in node.items():
            yield from targets(value, f"{where}.{key}" if where else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from targets(value, f"{where}[{i}]")


def flat(node: Any) -> dict[str, str]:
    """Nested settings as ``{"module.optimizer.lr": "0.003"}``; each value written as in an override."""
    return {key: shown(value) for key, value in leaves(node)}


def shown(value: Any) -> str:
    """A value as an override writes it: ``0.003``, ``true``, ``null``, ``[8, 16]``, ``auto``."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return repr(value)
    return json.dumps(value)
