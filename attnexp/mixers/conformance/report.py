"""The kit's report: one line per check as it is measured, the smoke run of the composed network, a verdict line, and
the mixer's speed beside dot's at the size checked."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, cast

import torch
from omegaconf import DictConfig, OmegaConf

from attnexp.errors import explain
from attnexp.mixers.conformance import Kit, Result, Size, run_checks
from attnexp.mixers.conformance.speed import compare_with_dot, machine
from attnexp.mixers.request import MixerRequest


def report(
    cfg: DictConfig,
    choices: dict[str, Any],
    network: MixerRequest | None,
    smoke: Callable[[], Result],
    say: Callable[[str], None] = print,
) -> list[Result]:
    """The kit's lines for the mixer ``cfg.model`` builds, each passed to ``say`` as it is measured; the checks, in
    order (the speed is measured when none failed). ``network``: the request of the first mixer of the network the
    command names (None: the kit's small default size); ``smoke``: the short run of that network, the last check."""
    from hydra.utils import instantiate

    warnings.filterwarnings("ignore", category=UserWarning)  # a library's warning on the way: the lines say what ran
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors: one thread is fastest and leaves the other cores alone
    factory = instantiate(cfg.model)
    kit = Kit(factory, cfg.seed, Size.of(network) if network else None)  # a causal-only mixer's checks: causal
    size, checked = kit.size, cast(MixerRequest, kit.build().request)  # the size checked, the checks' requests
    if size.own is not None:  # checked longer than the network runs (a causal mixer): its speed at the network's
        checked = checked._replace(num_tokens=size.own)
    where = f"the network of data={choices.get('data')}, net={choices.get('net')}" if network else "the kit's small"
    where += "" if network else " default"
    say(
        f"attnexp-check model={choices.get('model')} ({cfg.model._target_}): {size.describe()}, seed {cfg.seed}, CPU; "
        f"{where}{causal_note(size, network is not None, factory)}"
    )
    results = []
    for result in run_checks(factory, seed=cfg.seed, size=size):
        results.append(result)
        say(line(result))
    results.append(smoke())
    say(line(results[-1]))
    failed = [r.name for r in results if r.ok is False]
    verdict = f"{len(failed)} failed ({', '.join(failed)})" if failed else "all passed or do not apply"
    say(f"{len(results)} checks: {verdict}")
    if cfg.speed and not failed:
        torch.set_num_threads(int(cfg.get("threads") or threads))
        gpu = torch.cuda.is_available() and cfg.trainer.accelerator in ("auto", "gpu", "cuda")
        device = torch.device("cuda" if gpu else "cpu")
        batch = int(OmegaConf.select(cfg, "data.batch_size", default=None) or 32) if network else size.batch
        at = (
            f"speed at batch {batch}, {checked.num_tokens} tokens, width {checked.dim}, {checked.heads} "
            f"head{'s' * (checked.heads != 1)}{', causal' * checked.causal}"
        )
        try:
            speed = compare_with_dot(factory, checked, batch, device=device, seed=cfg.seed)
        except Exception as err:  # dot cannot be built at this size, or memory runs out: the checks stand
            say(f"{at}: not measured ({explain(err)})")
        else:
            say(f"{at} (forward and backward, the path a run trains with): {speed.describe()}; {machine(device)}")
    return results


def causal_note(size: Size, named: bool, factory: Any) -> str:
    """What the first line says of causality: checked causal as the network builds its mixers, or as the mixer
    declares itself."""
    if not size.causal:
        return ""
    name = getattr(factory, "func", factory).__name__
    why = "the mixer causal, as the network builds it" if named else f"{name} declares causal_only"
    return f" ({why}: checked under causal masks, with and without padding)"


def line(result: Result) -> str:
    mark = {True: "PASS", False: "FAIL", None: "n/a "}[result.ok]
    return f"{mark}  {result.name:<25}  {result.measured}"
