"""The ``attnexp`` entrypoint: compose the config, build the objects, fit, test."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import hydra
import pytorch_lightning as pl
from hydra.errors import InstantiationException
from hydra.utils import get_object, instantiate
from omegaconf import DictConfig
from torch import nn

from attnexp.errors import AttnexpError

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "configs")


def build_net(net_cfg: DictConfig, spec: dict[str, Any]) -> nn.Module:
    """Instantiate the network from its config and the data's shape facts (``datamodule.spec``)."""
    params = inspect.signature(get_object(net_cfg._target_)).parameters
    unknown = sorted(k for k in spec if k not in params)
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        raise AttnexpError(
            f"The network {net_cfg._target_} does not fit this data: the data describes itself by {sorted(spec)}, "
            f"and the network takes no {unknown}. Text data (data=corpus, data=text) goes with net=lm, image data "
            "(data=digits, data=mnist) with net=patch: drop the net= override or pick the matching net."
        )
    try:
        return instantiate(net_cfg, **spec)
    except InstantiationException as err:  # show the network's own explanation, not Hydra's wrapper
        if isinstance(err.__cause__, AttnexpError):
            raise err.__cause__ from None
        raise


def train(cfg: DictConfig) -> dict[str, float]:
    """Run one experiment described by ``cfg``; return the final metrics."""
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    datamodule: pl.LightningDataModule = instantiate(cfg.data)
    net = build_net(cfg.net, datamodule.spec)
    module: pl.LightningModule = instantiate(cfg.module, net=net)
    callbacks: list[pl.Callback] = [instantiate(c) for c in (cfg.get("callbacks") or {}).values() if c]
    logger = instantiate(cfg.logger) if cfg.get("logger") else False
    trainer: pl.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=logger)
    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    if cfg.get("test"):
        best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
        trainer.test(module, datamodule=datamodule, ckpt_path=best or None)
    return {k: float(v) for k, v in trainer.callback_metrics.items()}


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="train")
def main(cfg: DictConfig) -> Any:
    """Console script ``attnexp``; returns ``val/acc_best`` for Hydra sweepers."""
    metrics = train(cfg)
    return metrics.get("val/acc_best")


if __name__ == "__main__":
    main()
