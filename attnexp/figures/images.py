"""Figures for image tasks: attention maps beside their images, and a grid of predictions."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from torch import Tensor  # noqa: E402


def attention_figure(images: Tensor, maps: list[Tensor | None]) -> plt.Figure:
    """One row per sample: the input, then every layer's map per head (or SE channel gates)."""
    layers = [(i, m) for i, m in enumerate(maps) if m is not None]
    panels = [(f"layer {i} head {h}", m[:, h]) for i, m in layers if m.dim() == 4 for h in range(m.shape[1])]
    panels += [(f"layer {i} gates", m.reshape(len(m), 1, -1)) for i, m in layers if m.dim() < 4]
    cells = []
    for r in range(len(images)):
        cells.append((r, 0, images[r].permute(1, 2, 0).squeeze(-1), "input", {"cmap": "gray"}, {}))
        cells += [(r, c, data[r].float(), title, {"cmap": "viridis"}, {}) for c, (title, data) in enumerate(panels, start=1)]
    return panel_figure(cells, len(images), 1 + len(panels), (2.2, 2.2))


def prediction_figure(images: Tensor, targets: Tensor, preds: Tensor, columns: int = 8) -> plt.Figure:
    """Grid of images titled ``true/pred``; wrong predictions in red."""
    cells = [
        (i // columns, i % columns, image.permute(1, 2, 0).squeeze(-1), f"{t}/{p}", {"cmap": "gray"},
         {"fontsize": 9, "color": "black" if t == p else "red"})
        for i, (image, t, p) in enumerate(zip(images, targets.tolist(), preds.tolist()))
    ]
    return panel_figure(cells, -(-len(images) // columns), columns, (1.4, 1.5))


def panel_figure(cells: list[tuple[int, int, Tensor, str, dict, dict]], rows: int, columns: int, size: tuple[float, float]) -> plt.Figure:
    """Panels (row, column, image, title, imshow options, title options) on a grid of ``size``-inch
    cells, each image a square under its title. One axes holds them all: an axes per panel made
    the figures cost more than a short training run."""
    fig = plt.figure(figsize=(size[0] * columns, size[1] * rows))
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    side = min(0.88 * size[0], 0.78 * size[1])  # inches
    half, height = side / size[0] / 2, side / size[1]  # in cells
    for r, c, image, title, style, text in cells:
        ax.imshow(image, extent=(c + 0.5 - half, c + 0.5 + half, r + 0.97, r + 0.97 - height), interpolation="nearest", **style)
        ax.text(c + 0.5, r + 0.94 - height, title, ha="center", va="bottom", **{"fontsize": 8, **text})
    ax.set_xlim(0, columns), ax.set_ylim(rows, 0), ax.set_aspect("auto"), ax.set_axis_off()
    return fig
