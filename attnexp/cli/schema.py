"""The types of the config's top-level keys and of the Trainer's numbers and switches, as structured configs in Hydra's
ConfigStore: OmegaConf refuses ``resume=flase`` or ``trainer.max_epochs=abc`` while composing, and the pre-flight
stage explains it (:mod:`attnexp.cli.typos`). Groups stay open (``Any``): each option's classes check their own
arguments; ``+trainer.<argument>=...`` adds any other Trainer argument."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore


@dataclass
class TrainerSchema:
    _target_: str = "pytorch_lightning.Trainer"
    default_root_dir: str | None = None
    accelerator: str = "auto"
    strategy: Any = "auto"
    devices: Any = 1
    num_nodes: int = 1
    max_epochs: int = 5
    max_steps: int = -1
    limit_train_batches: Any = 1.0  # a fraction or a number of batches
    limit_val_batches: Any = 1.0
    limit_test_batches: Any = 1.0
    precision: Any = "32-true"
    deterministic: Any = False  # or "warn"
    check_val_every_n_epoch: int | None = 1
    log_every_n_steps: int = 0
    gradient_clip_val: float | None = None
    gradient_clip_algorithm: str | None = None
    accumulate_grad_batches: int = 1
    use_distributed_sampler: bool = False
    num_sanity_val_steps: int = 2
    enable_model_summary: bool = True


def register() -> None:
    """Put the schemas in Hydra's ConfigStore: ``train.yaml`` names ``train_schema`` first in its defaults,
    ``check.yaml`` adds ``check_schema``, ``predict.yaml`` names ``predict_schema``. The top level stays open (typed
    values, not a dataclass), so a command's config can add keys of its own."""
    from omegaconf import BooleanNode, FloatNode, IntegerNode, OmegaConf, StringNode

    store = ConfigStore.instance()
    top = {
        "seed": IntegerNode(0),
        "threads": IntegerNode(None),
        "ckpt_path": StringNode(None),
        "test": BooleanNode(True),
        "resume": BooleanNode(False),
        "trainer": OmegaConf.structured(TrainerSchema),
    }
    store.store(name="train_schema", node=OmegaConf.create(top))
    store.store(name="check_schema", node=OmegaConf.create({"speed": BooleanNode(True)}))
    numbers = {"top_k": IntegerNode(5), "tokens": IntegerNode(10), "sample": BooleanNode(False), "seed": IntegerNode(0)}
    numbers |= {"temperature": FloatNode(1.0), "beam": IntegerNode(4)}
    store.store(name="predict_schema", node=OmegaConf.create(numbers))
