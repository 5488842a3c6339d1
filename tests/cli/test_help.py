"""Each command's --help says what it does and how to call it, with examples, on one screen (finding 10)."""

from __future__ import annotations

import pytest
from helpers import run_script

from attnexp.mixers.conformance import CHECKS

CASES = {
    "attnexp": (
        "attnexp.cli.train",
        [
            "Examples:",
            "attnexp --multirun model=dot,euclid data=mnist seed=0,1,2",
            "model: cosine, dot, euclid",
            "hydra/launcher: parallel (default",
            "basic (one after",
            "slurm (a SLURM cluster",
            "resume=false",
            "Exit status: 0 ok, 1 failed, 2 bad input",
        ],
    ),
    "attnexp-predict": (
        "attnexp.cli.predict",
        [
            "attnexp-predict: what a trained run predicts",
            "Examples:",
            "attnexp-predict run=outputs/runs/",
            "checkpoint: best",
            "beam: 4",
            "top_k: 5",
        ],
    ),
    "attnexp-check": (
        "attnexp.cli.check",
        [
            "attnexp-check: the conformance kit",
            "Examples:",
            "--no-speed",
            "seed=0",
            "attnexp-check model=mine data=mnist net.dim=64",
            "speed line",
            "smoke run",
            *(c.name for c in CHECKS),
            "permutation_equivariant",
            "weight_kind",
        ],
    ),
    "attnexp-compare": (
        "attnexp.cli.compare",
        [
            "usage: attnexp-compare",
            "Compare the runs under run or sweep folders",
            "examples:",
            "attnexp-compare outputs/multirun/",
            "--baseline",
            "exit status: 0",
        ],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_help_says_what_the_command_does_with_examples(name, tmp_path):
    _module, words = CASES[name]
    proc = run_script(tmp_path, name, "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    for word in words:
        assert word in proc.stdout, (word, proc.stdout)
    assert "powered by Hydra" not in proc.stdout and "Override anything in the config" not in proc.stdout
    assert len(proc.stdout.splitlines()) <= 60
    if name != "attnexp":
        assert "data: captions" not in proc.stdout and "trainer: cpu" not in proc.stdout  # not the training's groups
    paragraphs = [
        p for p in proc.stdout.split("\n\n") if p.strip() and not p.lstrip().startswith(("usage", "-", "examples"))
    ]
    assert all(not p.rstrip().endswith((",", " the", " and", " or")) for p in paragraphs)  # no sentence cut off
