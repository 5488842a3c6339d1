"""The data module of a run, read once: the pre-flight stage builds it (:func:`attnexp.cli.build.check`), the run's
identity reads its files, the run trains on it; another run in the same process gets a new one."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

READ: list[tuple[str, Any]] = []  # the data module the last check read, with its config


def key(cfg: DictConfig) -> str:
    return str(OmegaConf.to_container(OmegaConf.masked_copy(cfg, ["data", "paths"]), resolve=False))


def keep(cfg: DictConfig, data: Any) -> None:
    """``data``, read for ``cfg``, is the one its run will train on."""
    READ[:] = [(key(cfg), data)]


def checked(cfg: DictConfig) -> Any:
    """The data module read for ``cfg``, else a new one (its files are what a run's identity reads)."""
    from hydra.utils import instantiate

    found = [data for k, data in READ if k == key(cfg)]
    return found[0] if found else instantiate(cfg.data)


def forget() -> None:
    READ.clear()


def handed_over(cfg: DictConfig) -> Any:
    """The data module read for ``cfg``, handed to its run (once: another run gets a new one)."""
    data = checked(cfg)
    READ.clear()
    return data
