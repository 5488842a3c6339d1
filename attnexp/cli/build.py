"""The objects of a run built from its composed config with Hydra's ``instantiate``: the data module, the network
(completed by the data's shape facts), the optimizer. :func:`check` builds them as a run will, the network on PyTorch's
meta device (nothing allocated), so that a constructor refuses its bad arguments, or a data module its missing files,
before any run folder exists; the data it read is handed to the run that follows in this process
(:mod:`attnexp.runs.data`)."""

from __future__ import annotations

import inspect
from typing import Any

from omegaconf import DictConfig, OmegaConf

from attnexp import config_dir
from attnexp.errors import AttnexpError, is_bad_input, root_cause
from attnexp.runs import data as data_of_run


def check(cfg: DictConfig) -> Any:
    """Build the data (read), the network, the task and the optimizer of ``cfg`` as the run will; raise the first
    :class:`AttnexpError` (bad input); return the network (meta device), or None where the user's own code failed (a
    bug, which the run meets and records)."""
    import torch
    from hydra.utils import instantiate

    try:
        data = instantiate(cfg.data)
        data.prepare_data()
        data.setup()  # sizes that do not fit are found when the data is read
        data_of_run.keep(cfg, data)
        with torch.device("meta"):
            net = network(cfg.net, data.spec)
        instantiate(cfg.task)
        optimizer(cfg.module.optimizer, [torch.nn.Parameter(torch.zeros(1))])
        return net
    except Exception as err:
        from attnexp.mixers.faults import explain_mixer_failure

        if is_bad_input(explain_mixer_failure(err)):
            raise root_cause(err) from None
        return None


def network(net_cfg: DictConfig, spec: dict[str, Any]) -> Any:
    """The network of ``net_cfg`` completed by the data's shape facts (``datamodule.spec``)."""
    from hydra.utils import instantiate

    unknown = unaccepted(net_cfg._target_, spec)
    if unknown:
        nets = [(p.stem, OmegaConf.load(p)._target_) for p in sorted((config_dir() / "net").glob("*.yaml"))]
        fits = [f"net={name}" for name, target in nets if not unaccepted(target, spec)]
        raise AttnexpError(
            f"The network {net_cfg._target_} does not fit this data: the data describes itself by {sorted(spec)}, "
            f"and the network takes no {unknown}. Drop the net= override (each data config picks a network that "
            f"fits it) or pick one that does: {', '.join(fits) or 'none of the net options'}."
        )
    return instantiate(net_cfg, **spec)


def unaccepted(target: str, keys: Any) -> list[str]:
    """The ``keys`` that the callable ``target`` (a dotted path) takes no argument for."""
    from hydra.utils import get_object

    params = inspect.signature(get_object(target)).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    return sorted(str(k) for k in keys if k not in params)


def optimizer(node: DictConfig, params: list[Any]) -> Any:
    """The optimizer of ``module.optimizer``; a key its class does not take is refused by name (switching
    ``_target_`` keeps the default's ``fused``, which not every optimizer takes)."""
    from hydra.utils import get_object, instantiate

    taken = inspect.signature(get_object(node._target_)).parameters
    unknown = [str(k) for k in node if not str(k).startswith("_") and k not in taken]
    if unknown:
        raise AttnexpError(
            f"module.optimizer sets {', '.join(unknown)}, which {node._target_} does not take (it takes "
            f"{', '.join(k for k in taken if k != 'params')}). Remove it with "
            f"{' '.join(f'~module.optimizer.{k}' for k in unknown)}, or choose an optimizer that takes it."
        )
    return instantiate(node)(params)


def parameter_count(cfg: DictConfig) -> int | None:
    """The network's parameters, counted on PyTorch's meta device (nothing is allocated); None when it cannot be
    built."""
    try:
        import torch
        from hydra.utils import instantiate

        with torch.device("meta"):
            net = network(cfg.net, instantiate(cfg.data).spec)
        return sum(p.numel() for p in net.parameters())
    except Exception:
        return None
