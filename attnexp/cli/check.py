"""The ``attnexp-check`` entrypoint: the conformance kit (:mod:`attnexp.mixers.conformance`) on the mixer a run would
train, at the size of the network the command composes, then a smoke run of that network with every callback
(:mod:`attnexp.cli.smoke`), then the mixer's speed beside dot's. One line per check; exit status 1 when one fails."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from attnexp.cli import command, entrypoint, preflight
from attnexp.cli.budget import with_budget
from attnexp.cli.smoke import composed_network, smoke_run
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
    from attnexp.mixers import is_mixer

    net = composed_network(cfg)
    found = next((m for m in net.modules() if is_mixer(m)), None)
    if found is None:
        raise AttnexpError(f"The network {cfg.net._target_} holds no mixer: there is nothing to check.")
    return found


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="check")
def main(cfg: DictConfig) -> Any:
    """The Hydra app behind ``attnexp-check`` (:func:`cli`)."""
    try:
        from attnexp.mixers.conformance.report import report

        hydra_cfg = HydraConfig.get()
        named = network_named(list(hydra_cfg.overrides.task))
        network = composed_mixer(cfg).request if named else None
        smoke = functools.partial(smoke_run, cfg)
        lines: list[str] = []

        def say(text: str) -> None:
            lines.append(text)
            print(text, flush=True)

        results = report(cfg, hydra_cfg.runtime.choices, network, smoke, say)
    except Exception as err:  # a module that cannot be loaded, an option the mixer refuses: bad input; a mixer's bug
        failure: BaseException = err
        if "torch" in sys.modules:
            from attnexp.mixers.faults import explain_mixer_failure

            failure = explain_mixer_failure(err)
        if os.environ.get("HYDRA_FULL_ERROR") == "1" or not (isinstance(failure, AttnexpError) or is_bad_input(err)):
            raise
        command.refuse(f"attnexp-check: {explain(failure)}")
        raise SystemExit(EXIT_CODES["bad_input" if is_bad_input(failure) else "failed"]) from None
    passed = all(r.ok is not False for r in results)
    command.note_result({"passed": passed, "checks": [dataclasses.asdict(r) for r in results], "lines": lines})
    if not passed:
        raise SystemExit(EXIT_CODES["failed"])


def cli() -> None:
    """Console script ``attnexp-check``: the pre-flight stage (no run folders), then :func:`main`."""

    def check() -> None:
        sys.argv[1:] = with_budget(FLAGS.get(a, a) for a in sys.argv[1:])
        preflight.check(sys.argv[1:], CONFIG_DIR, "check", folders=False)

    entrypoint.run("attnexp-check", check, main)


if __name__ == "__main__":
    cli()
