"""The ``attnexp-check`` entrypoint: the conformance kit (:mod:`attnexp.mixers.conformance`) on one mixer, one line
per check, exit status 1 when one fails."""

from __future__ import annotations

import os
import sys
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from attnexp.cli import search_path
from attnexp.cli.fast_exit import run_then_exit
from attnexp.cli.targets import check_targets
from attnexp.errors import EXIT_CODES, explain, is_bad_input

search_path.register()


def report(cfg: DictConfig) -> tuple[str, bool]:
    """The kit's lines for the mixer ``cfg.model`` builds, and whether every check passed."""
    import warnings

    import torch
    from hydra.utils import instantiate

    from attnexp.mixers.conformance import Size, run_checks

    torch.set_num_threads(1)  # tiny tensors: one thread is fastest and leaves the other cores alone
    warnings.filterwarnings("ignore", category=UserWarning)  # e.g. eager FlexAttention on a CPU: the lines say what ran
    name = HydraConfig.get().runtime.choices.get("model")
    results = run_checks(instantiate(cfg.model), seed=cfg.seed)
    lines = [f"attnexp-check model={name} ({cfg.model._target_}): {Size().describe()}, seed {cfg.seed}, CPU"]
    width = max(len(r.name) for r in results)
    lines += [f"{'PASS' if r.ok else 'FAIL' if r.ok is False else 'n/a '}  {r.name:<{width}}  {r.measured}" for r in results]
    failed = [r.name for r in results if r.ok is False]
    lines.append(f"{len(results)} checks: {len(failed)} failed ({', '.join(failed)})" if failed else
                 f"{len(results)} checks: all passed or do not apply")
    return "\n".join(lines), not failed


@hydra.main(version_base="1.3", config_path=str(search_path.config_dir()), config_name="check")
def main(cfg: DictConfig) -> Any:
    """The Hydra app behind ``attnexp-check`` (:func:`cli`)."""
    try:
        hydra_cfg = HydraConfig.get()
        check_targets(cfg, list(hydra_cfg.searchpath), list(hydra_cfg.overrides.task))
        text, passed = report(cfg)
    except Exception as err:  # a module that cannot be loaded, or an option the mixer refuses: bad input
        if not is_bad_input(err) or os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"attnexp-check: {explain(err)}", file=sys.stderr)
        raise SystemExit(EXIT_CODES["bad_input"]) from None
    print(text)
    if not passed:
        raise SystemExit(EXIT_CODES["failed"])


def cli() -> None:
    """Console script ``attnexp-check``: :func:`main`, then a quick exit (see :mod:`attnexp.cli.fast_exit`)."""
    run_then_exit(main)


if __name__ == "__main__":
    cli()
