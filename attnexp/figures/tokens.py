"""Figures for token tasks: attention over a sentence, the next-token distribution."""

from __future__ import annotations

from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from torch import Tensor

from attnexp.figures.images import BAR_ROOM, MASKED_COLOUR, WEIGHT_SCALE, weight_scale

TOKEN = 0.13  # inches a token takes along a map's side: room for its label at font size 7
GAP = 0.25  # inches between two maps
TITLE = 0.3  # inches above a map for its title
LABEL_CHAR = 0.06  # inches a label's character takes at font size 7
SMALLEST = 1.3  # inches: a map's least side, the width of its title
LOWEST = 3.0  # inches: the figure's least height, the length of the colour bar's label


def token_attention_figure(
    tokens: list[str], maps: list[Tensor | None], masked: Tensor | None = None, rows: list[int] | None = None
) -> Figure:
    """A heatmap per layer and head, a layer's heads side by side, queries down and keys across; the query tokens
    left of each layer's first map, the key tokens under the last layer's maps. ``masked`` (L, L), True where a
    query may not see a key (a causal layer's later tokens), draws those cells in grey, apart from weights of 0;
    ``rows``: the queries shown (every one when None: the answer positions of a recall task). SE gates (L, C) make a
    row of their own, tokens down and channels across. All maps are on one scale ([0, 1] unless a weight lies
    outside it) and on one axes, laid out in inches: an axes per map with its own tick labels cost more than a
    short training run."""
    queries = list(range(len(tokens))) if rows is None else rows
    masked = None if masked is None else masked[queries]
    grid: list[list[tuple[str, Tensor]]] = [
        [(f"layer {i} head {h}", m[h, queries]) for h in range(m.shape[0])]
        for i, m in enumerate(maps)
        if m is not None and m.dim() == 3
    ]
    square = len(grid)  # the rows of attention maps; gate rows follow
    grid += [
        [(f"layer {i} gates", m.reshape(len(tokens), -1))] for i, m in enumerate(maps) if m is not None and m.dim() < 3
    ]
    panels = [data for row in grid for _, data in row]
    scale = weight_scale(panels) if panels else WEIGHT_SCALE
    colours = matplotlib.colormaps[str(scale["cmap"])].with_extremes(bad=MASKED_COLOUR)
    labels = [tokens[r] for r in queries]
    margin = 0.35 + LABEL_CHAR * max(map(len, tokens), default=1)  # the labels and the word that names them
    tops, y = [], 0.0
    for r, row in enumerate(grid):  # each row's top, in inches: titles above, keys or channels under the last
        tops.append(y + TITLE)
        y += TITLE + max(TOKEN * len(row[0][1]), SMALLEST) + (margin if r >= square - 1 else 0.0) + GAP
    width = margin + max(
        (sum(max(TOKEN * data.shape[1], SMALLEST) + GAP for _, data in row) for row in grid), default=1.0
    )
    width, height = width + BAR_ROOM, max(y, LOWEST)
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))  # in inches, y downwards
    shown: Any = None
    for r, (row, top) in enumerate(zip(grid, tops)):
        attention, x = r < square, margin
        for c, (title, data) in enumerate(row):
            values = np.asarray(data.float())
            if attention and masked is not None:
                values = np.ma.masked_array(values, np.asarray(masked[: len(values), : values.shape[1]]))
            down, across = (max(TOKEN * n, SMALLEST) for n in values.shape)
            step_down, step_across = down / values.shape[0], across / values.shape[1]  # a token's inches
            shown = ax.imshow(
                values, extent=(x, x + across, top + down, top), interpolation="nearest", **{**scale, "cmap": colours}
            )
            ax.text(x + across / 2, top - 0.05, title, ha="center", va="bottom", fontsize=9)
            if c == 0:  # the tokens down, once a row
                for n, label in enumerate(labels if attention else tokens):
                    ax.text(
                        x - 0.04, top + step_down * (n + 0.5), label, ha="right", va="center", fontsize=7, gid="down"
                    )
                ax.text(0.05, top + down / 2, "query" if attention else "token", rotation=90, va="center", fontsize=8)
            if r >= square - 1:  # keys across under the last row of attention maps, channels under each gate map
                names = tokens if attention else [str(n) for n in range(values.shape[1])]
                for n, label in enumerate(names):
                    ax.text(
                        x + step_across * (n + 0.5),
                        top + down + 0.04,
                        label,
                        ha="center",
                        va="top",
                        rotation=90,
                        fontsize=7,
                        gid="across",
                    )
                ax.text(
                    x + across / 2,
                    top + down + margin - 0.05,
                    "key" if attention else "channel",
                    ha="center",
                    va="bottom",
                    fontsize=8,
                )
            x += across + GAP
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.set_aspect("auto")
    ax.set_axis_off()
    if shown is not None:
        label = "weight (attention) or gate" + ("; grey: masked" if masked is not None else "")
        bar = fig.add_axes(((width - BAR_ROOM + 0.15) / width, 0.1, 0.15 / width, 0.8))
        fig.colorbar(shown, cax=bar, label=label)
    return fig


def next_token_figure(
    prefix: list[str],
    probs: Tensor,
    vocab: list[str],
    target: str | None,
    top_k: int = 15,
    entropy: float | None = None,
) -> Figure:
    """Bar chart of the ``top_k`` most likely next tokens after ``prefix``; the true next one in orange."""
    top = probs.topk(min(top_k, len(probs)))
    labels = [repr(vocab[i])[1:-1] for i in top.indices.tolist()]
    colors = ["tab:orange" if vocab[i] == target else "tab:blue" for i in top.indices.tolist()]
    fig = Figure(figsize=(1.0 + 0.45 * len(labels), 3.2))
    ax = fig.subplots()
    ax.bar(range(len(labels)), top.values.float(), color=colors)
    ax.set_xticks(range(len(labels)), labels, rotation=60, fontsize=8)
    ax.set_ylabel("probability")
    shown = " ".join(prefix[-8:])
    sure = "" if entropy is None else f", entropy {entropy:.2f} nats"
    ax.set_title(
        f"next token after '{shown}'" + (f" (true: {target!r}{sure})" if target is not None else ""), fontsize=9
    )
    fig.tight_layout()
    return fig
