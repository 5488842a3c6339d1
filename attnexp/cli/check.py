"""The ``attnexp-check`` entrypoint: the conformance kit (:mod:`attnexp.mixers.conformance`) on the mixer a run would
train, at the size of the network the command composes, then a smoke run of that network with every callback
(:mod:`attnexp.cli.smoke`), then the mixer's speed beside dot's. One line per check; exit status 1 when one fails."""

from __future__ import annotations

import os
import sys
from typing import Any, cast

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from attnexp.cli import preflight
from attnexp.cli.targets import check_targets
from attnexp.cli.train import CONFIG_DIR
from attnexp.errors import EXIT_CODES, AttnexpError, explain, is_bad_input

NETWORK_GROUPS = ("data", "net", "task", "experiment")  # an override of one of these names the network to check at
FLAGS = {"--no-speed": "speed=false"}


def network_named(overrides: list[str]) -> bool:
    """Whether the command names the network (its data, net, task or an experiment) rather than the mixer alone."""
    keys = (o.split("=", 1)[0].lstrip("+~") for o in overrides)
    return any(k.split(".", 1)[0].split("/", 1)[0] in NETWORK_GROUPS for k in keys)


def composed_mixer(cfg: DictConfig) -> Any:
    """The first mixer of the network ``cfg`` composes (its requests: width, heads, tokens, causal)."""
    from hydra.utils import instantiate

    from attnexp.build import network as build_net
    from attnexp.mixers import is_mixer

    net = build_net(cfg.net, instantiate(cfg.data).spec)
    found = next((m for m in net.modules() if is_mixer(m)), None)
    if found is None:
        raise AttnexpError(f"The network {cfg.net._target_} holds no mixer: there is nothing to check.")
    return found


def report(cfg: DictConfig, say: Any = print) -> bool:
    """The kit's lines for the mixer ``cfg.model`` builds, each passed to ``say`` as it is measured; whether every
    check passed."""
    import warnings

    import torch
    from hydra.utils import instantiate

    from attnexp.cli.smoke import smoke_run
    from attnexp.mixers import MixerRequest
    from attnexp.mixers.conformance import Kit, Size, run_checks
    from attnexp.mixers.conformance.speed import compare_with_dot, machine

    warnings.filterwarnings("ignore", category=UserWarning)  # a library's warning on the way: the lines say what ran
    choices = HydraConfig.get().runtime.choices
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors: one thread is fastest and leaves the other cores alone
    request = composed_mixer(cfg).request
    named = network_named(list(HydraConfig.get().overrides.task))
    factory = instantiate(cfg.model)
    kit = Kit(factory, cfg.seed, Size.of(request) if named else None)  # a causal-only mixer's checks: causal
    size, checked = kit.size, cast(MixerRequest, kit.build().request)  # the size checked, the checks' requests
    network = (
        f"the network of {', '.join(f'{g}={choices.get(g)}' for g in ('data', 'net'))}"
        if named
        else "the kit's small default"
    )
    say(
        f"attnexp-check model={choices.get('model')} ({cfg.model._target_}): {size.describe()}, seed {cfg.seed}, CPU; "
        f"{network}{causal_note(size, named, factory)}"
    )
    results = []
    for result in run_checks(factory, seed=cfg.seed, size=size):
        results.append(result)
        say(line(result))
    results.append(smoke_run(cfg))
    say(line(results[-1]))
    failed = [r.name for r in results if r.ok is False]
    say(
        f"{len(results)} checks: {len(failed)} failed ({', '.join(failed)})"
        if failed
        else f"{len(results)} checks: all passed or do not apply"
    )
    if cfg.speed and not failed:
        torch.set_num_threads(int(cfg.get("threads") or threads))
        device = torch.device(
            "cuda" if torch.cuda.is_available() and cfg.trainer.accelerator in ("auto", "gpu", "cuda") else "cpu"
        )
        batch = int(OmegaConf.select(cfg, "data.batch_size", default=None) or 32) if named else size.batch
        where = (
            f"speed at batch {batch}, {checked.num_tokens} tokens, width {checked.dim}, {checked.heads} "
            f"head{'s' * (checked.heads != 1)}{', causal' * checked.causal}"
        )
        try:
            speed = compare_with_dot(factory, checked, batch, device=device, seed=cfg.seed)
        except Exception as err:  # dot cannot be built at this size, or memory runs out: the checks stand
            say(f"{where}: not measured ({explain(err)})")
        else:
            say(f"{where} (forward and backward, the path a run trains with): {speed.describe()}; {machine(device)}")
    return not failed


def causal_note(size: Any, named: bool, factory: Any) -> str:
    """What the first line says of causality: checked causal as the network builds its mixers, or as the mixer
    declares itself."""
    if not size.causal:
        return ""
    name = getattr(factory, "func", factory).__name__
    why = "the mixer causal, as the network builds it" if named else f"{name} declares causal_only"
    return f" ({why}: checked under causal masks, with and without padding)"


def line(result: Any) -> str:
    mark = {True: "PASS", False: "FAIL", None: "n/a "}[result.ok]
    return f"{mark}  {result.name:<25}  {result.measured}"


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="check")
def main(cfg: DictConfig) -> Any:
    """The Hydra app behind ``attnexp-check`` (:func:`cli`)."""
    try:
        hydra_cfg = HydraConfig.get()
        check_targets(cfg, list(hydra_cfg.searchpath), list(hydra_cfg.overrides.task))
        passed = report(cfg, say=lambda text: print(text, flush=True))
    except Exception as err:  # a module that cannot be loaded, an option the mixer refuses: bad input; a mixer's bug
        failure: BaseException = err
        if "torch" in sys.modules:
            from attnexp.mixers.faults import explain_mixer_failure

            failure = explain_mixer_failure(err)
        if os.environ.get("HYDRA_FULL_ERROR") == "1" or not (isinstance(failure, AttnexpError) or is_bad_input(err)):
            raise
        print(f"attnexp-check: {explain(failure)}", file=sys.stderr)
        raise SystemExit(EXIT_CODES["bad_input" if is_bad_input(failure) else "failed"]) from None
    if not passed:
        raise SystemExit(EXIT_CODES["failed"])


def cli() -> None:
    """Console script ``attnexp-check``: :func:`main`; a second Ctrl-C, which stops at once, exits with status 130."""
    sys.argv[1:] = [FLAGS.get(a, a) for a in sys.argv[1:]]
    try:
        preflight.check(sys.argv[1:], CONFIG_DIR, "check", folders=False)
    except AttnexpError as err:
        print(f"attnexp-check: {err}", file=sys.stderr)
        raise SystemExit(EXIT_CODES["bad_input"]) from None
    try:
        main()
    except KeyboardInterrupt:
        raise SystemExit(130) from None


if __name__ == "__main__":
    cli()
