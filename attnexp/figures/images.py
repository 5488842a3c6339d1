"""Figures for image tasks: attention maps beside their images, squeeze-excitation gates, and a grid of predictions."""

from __future__ import annotations

import textwrap
from typing import Any

from matplotlib.figure import Figure
from torch import Tensor

WEIGHT_SCALE = {"cmap": "viridis", "vmin": 0.0, "vmax": 1.0}  # every attention map on one scale, so mixers compare
SIGNED_COLOURS = "RdBu_r"  # diverging: blue below 0, white at 0, red above
MASKED_COLOUR = "0.6"  # a cell its mask hides: a grey no weight scale gives to a weight of 0
BAR_ROOM = 1.2  # inches right of the maps: the colour bar, its tick labels (a signed scale's "-0.05") and its label


def wrapped(text: str, inches: float, size: float) -> str:
    """``text`` broken into lines that fit ``inches`` at font ``size`` (a character about 0.6 of the size wide), so
    that a title stays inside its figure."""
    return textwrap.fill(text, width=max(12, int(inches * 72 / (0.6 * size))))


def weight_scale(maps: list[Tensor]) -> dict:
    """The colour scale of attention maps: [0, 1] when every weight lies there (softmax's, sigmoid's), so mixers
    compare; [0, the largest weight] when one passes 1 (a mixer's weights need not be distributions); and with a
    negative weight (signed weights, a difference of maps) a diverging scale centred at 0, from -m to m, m the
    largest |weight| drawn, so that small weights of either sign show."""
    low, high = min(float(m.min()) for m in maps), max(float(m.max()) for m in maps)
    if low < 0.0:
        bound = max(-low, high)
        return {"cmap": SIGNED_COLOURS, "vmin": -bound, "vmax": bound}
    return WEIGHT_SCALE if high <= 1.0 else {**WEIGHT_SCALE, "vmax": high}


def attention_figure(images: Tensor, maps: list[Tensor | None]) -> Figure | None:
    """One row per sample: the input, then every layer's attention per head (queries down, keys across, by patch
    index; all on one scale: :func:`weight_scale`). None when no layer has (B, H, L, L) weights."""
    panels = [
        (f"layer {i} head {h}", m[:, h])
        for i, m in enumerate(maps)
        if m is not None and m.dim() == 4
        for h in range(m.shape[1])
    ]
    if not panels:
        return None
    cells: list[Any] = []
    scale = weight_scale([data for _, data in panels])
    for r in range(len(images)):
        cells.append((r, 0, images[r].permute(1, 2, 0).squeeze(-1), "input", {"cmap": "gray"}, {}))
        cells += [(r, c, data[r].float(), title, scale, {}) for c, (title, data) in enumerate(panels, start=1)]
    fig = panel_figure(cells, len(images), 1 + len(panels), (1.5, 1.7), axis_labels=("query patch", "key patch"))
    width, height = fig.get_size_inches()
    fig.set_size_inches(width + BAR_ROOM, height)  # room on the right for the colour bar and its labels
    grid = fig.axes[0]
    box = grid.get_position()
    grid.set_position((0.0, box.y0, width / (width + BAR_ROOM), box.height))
    bar = fig.add_axes(
        ((width + 0.15) / (width + BAR_ROOM), box.y0 + 0.1 * box.height, 0.15 / (width + BAR_ROOM), 0.8 * box.height)
    )
    fig.colorbar(grid.images[1], cax=bar, label="attention weight")
    return fig


def number_patches(fig: Figure, patch: int, tokens: int) -> None:
    """Grid the inputs of an :func:`attention_figure` into their ``patch`` x ``patch`` patches and number them as the
    maps do (row by row), so that a query or key patch of a map can be found in the image. ``tokens``: the maps'
    length; one more than the patches is a class token, named under the input."""
    import matplotlib.patheffects as effects

    ax = fig.axes[0]
    for image in [im for im in ax.images if im.get_extent()[0] < 1]:  # the first column: the inputs
        drawn = image.get_array()  # drawn: it has an array
        rows, cols = (n // patch for n in drawn.shape[:2])  # type: ignore[union-attr]
        left, right, bottom, top = image.get_extent()
        dx, dy = (right - left) / cols, (top - bottom) / rows  # per patch, in the axes' units (y runs downwards)
        for k in range(1, cols):
            ax.plot([left + k * dx] * 2, [bottom, top], color="tab:orange", linewidth=0.8)
        for k in range(1, rows):
            ax.plot([left, right], [bottom + k * dy] * 2, color="tab:orange", linewidth=0.8)
        size = min(9.0, 0.35 * 72 * (right - left) * fig.get_size_inches()[0] / ax.get_xlim()[1] / cols)
        for n in range(rows * cols):  # in each patch's top left corner, where it hides least of the image
            ax.text(
                left + (n % cols + 0.06) * dx,
                top - (n // cols + 0.04) * dy,
                str(n),
                ha="left",
                va="top",
                fontsize=size,
                color="white",
                path_effects=[effects.withStroke(linewidth=1.5, foreground="black")],
            )
        if tokens == rows * cols + 1:
            ax.text((left + right) / 2, bottom + 0.02, f"{tokens - 1}: class token", ha="center", va="top", fontsize=9)


def gates_figure(maps: list[Tensor | None]) -> Figure | None:
    """Squeeze-excitation gates per channel, one bar chart per layer: the mean over the samples shown, with their
    spread (std) as whiskers: a gate with no spread is the same for every input. None when no layer has gates."""
    gates = [(i, m.reshape(len(m), -1).float()) for i, m in enumerate(maps) if m is not None and m.dim() < 4]
    if not gates:
        return None
    fig = Figure(figsize=(max(4.0, 0.25 * gates[0][1].shape[1] + 1.5), 2.6 * len(gates)))
    axes = fig.subplots(len(gates), 1, squeeze=False)
    for ax, (i, g) in zip(axes[:, 0], gates):
        channels = range(g.shape[1])
        ax.bar(channels, g.mean(0), yerr=g.std(0) if len(g) > 1 else None, color="tab:green", capsize=2)
        ax.set(
            ylim=(0, 1),
            xlabel="channel",
            ylabel="gate",
            title=f"layer {i} squeeze-excitation gates (mean, std over {len(g)} inputs)",
        )
        ax.set_xticks(list(channels)[:: max(1, g.shape[1] // 16)])
    fig.tight_layout()
    return fig


def prediction_figure(images: Tensor, targets: Tensor, preds: Tensor, columns: int = 8) -> Figure:
    """Grid of images titled ``true -> predicted``; wrong predictions in red."""
    cells = [
        (
            i // columns,
            i % columns,
            image.permute(1, 2, 0).squeeze(-1),
            f"{t} -> {p}",
            {"cmap": "gray"},
            {"fontsize": 9, "color": "black" if t == p else "red"},
        )
        for i, (image, t, p) in enumerate(zip(images, targets.tolist(), preds.tolist()))
    ]
    fig = panel_figure(cells, -(-len(images) // columns), columns, (1.4, 1.5), top=0.35)
    fig.suptitle("true -> predicted (wrong in red)", fontsize=10)
    return fig


def panel_figure(
    cells: list[tuple[int, int, Tensor, str, dict, dict]],
    rows: int,
    columns: int,
    size: tuple[float, float],
    axis_labels: tuple[str, str] | None = None,
    top: float = 0.0,
) -> Figure:
    """Panels (row, column, image, title, imshow options, title options) on a grid of ``size``-inch cells, each
    image a square under its title; ``axis_labels`` (down, across) mark the first and last index of every panel
    that is not the row's first. One axes holds them all: an axes per panel made the figures cost more than a
    short training run. ``top``: inches kept free above the grid for a title."""
    height_in = size[1] * rows + top
    fig = Figure(figsize=(size[0] * columns, height_in))
    ax = fig.add_axes((0.0, 0.0, 1.0, size[1] * rows / height_in))
    side = min(0.80 * size[0], 0.72 * size[1])  # inches
    half, height = side / size[0] / 2, side / size[1]  # in cells
    for r, c, image, title, style, text in cells:
        left, bottom = c + 0.5 - half, r + 0.92
        ax.imshow(image, extent=(left, c + 0.5 + half, bottom, bottom - height), interpolation="nearest", **style)
        ax.text(c + 0.5, bottom - height - 0.02, title, ha="center", va="bottom", **{"fontsize": 10, **text})
        if axis_labels and c > 0:
            rows_, cols_ = image.shape[-2:]
            ax.text(left - 0.01, bottom - height, "0", ha="right", va="top", fontsize=8)
            ax.text(left - 0.01, bottom, f"{rows_ - 1}", ha="right", va="bottom", fontsize=8)
            ax.text(left + 2 * half, bottom + 0.01, f"{cols_ - 1}", ha="right", va="top", fontsize=8)
            ax.text(left - 0.08, bottom - height / 2, axis_labels[0], ha="right", va="center", rotation=90, fontsize=8)
            ax.text(c + 0.5, bottom + 0.01, axis_labels[1], ha="center", va="top", fontsize=8)
    ax.set_xlim(0, columns)
    ax.set_ylim(rows, 0)
    ax.set_aspect("auto")
    ax.set_axis_off()
    return fig
