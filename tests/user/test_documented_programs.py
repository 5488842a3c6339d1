"""The user's tier, for the Python the documentation shows: every fenced ``python`` block of README.md, examples/ and
docs/ that is a whole program is run as a reader would run it after copying it into a file (``python block.py``, in
this process as :func:`helpers.run_python` runs a script), from a folder outside the checkout; a block that is not
run is a sketch (a body left as ``...``) or in :data:`NOT_RUN`, with why."""

from __future__ import annotations

from pathlib import Path

import pytest
from documented import Program, programs
from helpers import run_python

NOT_RUN = {  # a block's file and first line of code -> why this tier does not run it
    ("docs/python.md", "import attnexp"): "names the reader's run folders (outputs/runs/dot_corpus_3f2a9c01/seed=0); "
    "tests/cli/test_python_calls.py makes each of its calls",
}
PROGRAMS = programs()


def reason_not_run(block: Program) -> str | None:
    first = next(line for line in block.text.splitlines() if line.strip())
    if (block.file, first) in NOT_RUN:
        return NOT_RUN[block.file, first]
    return "a sketch: its bodies are left as ..." if block.sketch else None


RUN = [b for b in PROGRAMS if reason_not_run(b) is None]


def test_every_documented_program_is_run_or_said_why_not():
    listed = {(b.file, next(line for line in b.text.splitlines() if line.strip())) for b in PROGRAMS}
    assert set(NOT_RUN) <= listed, sorted(set(NOT_RUN) - listed)
    assert any(b.file == "docs/mixers.md" for b in RUN)


@pytest.mark.parametrize("block", RUN, ids=[b.where for b in RUN])
def test_the_documents_programs_run_as_written(block: Program, tmp_path: Path):
    script = tmp_path / f"block_{block.line}.py"
    script.write_text(block.text)
    proc = run_python(tmp_path, script.name)
    assert proc.returncode == 0, f"{block.where}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
