"""Euclid's Triton kernels compiled for NVIDIA GPUs without one (sm_80, sm_90; Triton's bundled ptxas), as the
operator launches them for bf16 inputs in the mixer's layout: the interpreter (tests/process/) never reaches the code
generator, so this is what shows they build. Each compiles in a fresh Triton cache (its key leaves some
environment switches out, so a cached kernel could hide a failing compile), spills nothing and leaves room for the
blocks per SM the design counts on. A file of its own: its compiles take seconds each, and run beside the rest."""

from __future__ import annotations

import pytest

pytest.importorskip("triton", reason="Triton is not installed (torch's Linux x86 wheels bring it)")

import importlib.util

from helpers import REPO

# the offline compiler lives beside the benchmark that reads its output (it runs Triton's bundled tools: no part of
# the package, which starts no process)
SPEC = importlib.util.spec_from_file_location("euclid_kernel_offline", REPO / "scripts" / "euclid_kernel_offline.py")
assert SPEC is not None and SPEC.loader is not None
offline = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(offline)

# Blocks per SM each kernel must keep (registers and shared memory): the forward pass's 3 on sm_90 as flash
# attention's of the same tiles (scripts/bench_kernel_static.py); the tiles from the differences run rarely.
BLOCKS = {
    "squared_norms": {80: 8, 90: 8},
    "euclid_forward": {80: 2, 90: 3},
    "euclid_backward_delta": {80: 2, 90: 2},
    "euclid_backward_exact": {80: 1, 90: 1},
    "euclid_backward": {80: 2, 90: 2},
    "euclid_backward_queries": {80: 8, 90: 8},
}


def test_every_launch_is_checked():
    assert set(offline.launches()) == set(BLOCKS)


@pytest.mark.parametrize("arch", offline.ARCHS, ids=lambda arch: f"sm_{arch}")
@pytest.mark.parametrize("name", list(BLOCKS))
def test_the_kernel_compiles_without_spilling(name, arch, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    compiled = offline.compile_for(offline.launches()[name], arch)
    used = offline.resources(compiled)
    assert used.stack == 0, f"{name} spills on sm_{arch}: {used}"
    assert used.blocks_per_sm(arch) >= BLOCKS[name][arch], f"{name} on sm_{arch}: {used}"
    assert any(tmp_path.rglob("*.cubin")), "not compiled into the fresh cache"
