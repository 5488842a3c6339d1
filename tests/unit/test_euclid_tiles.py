"""Euclid's CPU path on either side of its threshold: a call of at most ``tiles.KEEP_SCORES`` scores keeps its weights
for the backward pass, a longer one goes tile by tile (each tile computed once forward and once backward); both give
the same outputs and gradients, and the tiled one holds no more score-sized memory than three times its queries'
values."""

from __future__ import annotations

import threading

import pytest
import torch

from attnexp.mixers import causal_mask
from attnexp.mixers.euclid.ops import memory, rows, tiles
from attnexp.mixers.euclid.ops.fused import fused_euclid_attention

EPS = 1e-9


def inputs(length: int, dim: int = 8, batch: int = 3, heads: int = 2) -> list[torch.Tensor]:
    """q, k, v (B, H, L, D) with keys near their queries (exact rows) in some rows of some examples."""
    torch.manual_seed(length)
    q, k, v = (torch.randn(batch, heads, length, dim) for _ in range(3))
    k[0, :, 1] = q[0, :, 1]  # distance 0
    k[2, 1, 3] = q[2, 1, length - 1] + 1e-5  # a key within 1e-5 of the last query
    return [t.requires_grad_() for t in (q, k, v)]


def run(q, k, v, mask) -> tuple[torch.Tensor, ...]:
    """Outputs and the gradients of q, k and v for one fixed output gradient."""
    out = fused_euclid_attention(q, k, v, mask, q.shape[-1] ** -0.5, EPS)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    return (out, *torch.autograd.grad(out, (q, k, v), grad))


@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "causal"])
@pytest.mark.parametrize("length", [8, 9], ids=["kept (L = 8)", "tiled (L = 9)"])
def test_the_tiled_and_kept_paths_give_the_same_numbers_either_side_of_the_threshold(length, masked, monkeypatch):
    """The threshold put between 8 and 9 tokens (``tiles.KEEP_SCORES``: 3 x 2 x 8 x 8 scores): at L = 8 a call keeps
    its weights, at L = 9 it goes tile by tile; each is run again the other way, the tiled one in tiles of two groups
    and of a group's rows in three ranges (``tiles.CPU_TILE_SCORES``), with exact rows in both, and gives the same
    values and gradients."""
    q, k, v = inputs(length)
    mask = causal_mask(length) if masked else None
    monkeypatch.setattr(tiles, "KEEP_SCORES", 3 * 2 * 8 * 8)
    natural = run(q, k, v, mask)
    monkeypatch.setattr(tiles, "KEEP_SCORES", 0 if length == 8 else 1 << 20)  # the other side of the threshold
    if length == 8:
        monkeypatch.setattr(rows, "MEMORY_WIDTHS", 300.0)  # whole groups, two a tile
        monkeypatch.setattr(tiles, "CPU_TILE_SCORES", 2 * length * length)
    other = run(q, k, v, mask)
    monkeypatch.setattr(tiles, "KEEP_SCORES", 0)
    monkeypatch.setattr(tiles, "CPU_TILE_SCORES", 3 * length)  # a group's rows in three ranges
    ranges = run(q, k, v, mask)
    for name, a, b, c in zip(("out", "dq", "dk", "dv"), natural, other, ranges):
        scale = b.abs().max()
        assert (a - b).abs().max() <= 2e-6 * scale, name
        assert (a - c).abs().max() <= 2e-6 * scale, name


def test_the_tiled_path_holds_no_more_scores_than_three_times_its_queries_values(monkeypatch):
    """2 x 2 x 300 queries of width 4 against 300 keys, past the threshold: the thread's score-sized memory (the tiles'
    buffers and weights kept for the backward pass) holds at most 3 x 4,800 values (plus the vectorised loop's
    rounding), not the 360,000 scores a call that keeps its weights holds; memory of the order of dot attention's."""
    monkeypatch.setattr(tiles, "KEEP_SCORES", 1 << 16)  # fewer than the 2 x 2 x 300 x 300 scores here
    q, k, v = (torch.randn(2, 2, 300, 4, requires_grad=True) for _ in range(3))
    held: list[int] = []

    def call() -> None:  # a thread of its own: its workspace starts empty
        before = sum(m.numel() for free in memory._kept.values() for m in free)
        run(q, k, v, None)
        spaces = vars(memory._workspaces)
        held.append(sum(m.numel() for place in spaces.values() for m, _ in place.values()))
        held.append(sum(m.numel() for free in memory._kept.values() for m in free) - before)

    worker = threading.Thread(target=call)
    worker.start()
    worker.join()
    assert len(held) == 2 and held[0] <= 3 * 4800 + 2 * 64 and held[1] <= 0, held
