"""Figures for token tasks: attention over a sentence, the next-token distribution."""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from torch import Tensor

from attnexp.figures.images import MASKED_COLOUR, WEIGHT_SCALE, weight_scale


def token_attention_figure(
    tokens: list[str], maps: list[Tensor | None], masked: Tensor | None = None, rows: list[int] | None = None
) -> Figure:
    """One heatmap per layer and head, queries down and keys across, tokens on both axes; ``masked`` (L, L), True
    where a query may not see a key (a causal layer's later tokens), draws those cells in grey, apart from weights of
    0; ``rows``: the queries shown (every one when None: the answer positions of a recall task). The colour bar's
    labels and every title lie inside the figure (constrained layout).

    SE gates (L, C) are drawn with tokens down and channels across; all on one scale, [0, 1] unless a weight lies
    outside it.
    """
    queries = list(range(len(tokens))) if rows is None else rows
    heads = [(i, m[:, queries]) for i, m in enumerate(maps) if m is not None and m.dim() == 3]  # (H, rows, L)
    gates = [(i, m) for i, m in enumerate(maps) if m is not None and m.dim() < 3]  # (L, C)
    masked = None if masked is None else masked[queries]
    panels = [(f"layer {i} head {h}", m[h], True) for i, m in heads for h in range(m.shape[0])]
    panels += [(f"layer {i} gates", m.reshape(len(tokens), -1), False) for i, m in gates]
    scale = weight_scale([data for _, data, _ in panels]) if panels else WEIGHT_SCALE
    colours = matplotlib.colormaps[str(scale["cmap"])].with_extremes(bad=MASKED_COLOUR)
    side = 1.2 + 0.28 * len(tokens)
    height = side if rows is None else max(3.0, 1.2 + 0.28 * len(rows))
    fig = Figure(figsize=(side * max(1, len(panels)) + 1.0, height), layout="constrained")
    axes = fig.subplots(1, max(1, len(panels)), squeeze=False)
    for ax, (title, data, square) in zip(axes.flat, panels):
        values = np.asarray(data.float())
        if square and masked is not None:
            values = np.ma.masked_array(values, np.asarray(masked[: len(values), : values.shape[1]]))
        shown = ax.imshow(values, aspect="auto", interpolation="nearest", **{**scale, "cmap": colours})
        ax.set_title(title, fontsize=9)
        labels = [tokens[r] for r in queries] if square else tokens
        ax.set_yticks(range(len(labels)), labels, fontsize=7)
        ax.set_ylabel("query" if square else "token", fontsize=8)
        if square:
            ax.set_xticks(range(len(tokens)), tokens, fontsize=7, rotation=90)
        ax.set_xlabel("key" if square else "channel", fontsize=8)
    if panels:
        label = "weight (attention) or gate" + ("; grey: masked" if masked is not None else "")
        fig.colorbar(shown, ax=list(axes.flat), fraction=0.03, pad=0.01, label=label)
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
