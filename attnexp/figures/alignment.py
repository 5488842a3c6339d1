"""Figures for sequence-to-sequence tasks: cross-attention alignments, and captions with their attention over the
image."""

from __future__ import annotations

import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import Tensor

from attnexp.figures.images import SIGNED_COLOURS, weight_scale, wrapped


def label(token: str) -> str:
    return repr(token)[1:-1] if token != " " else "␣"


def alignment_figure(sources: list[list[str]], outputs: list[list[str]], maps: list[Tensor]) -> Figure:
    """One row per example, one panel per head: the weight each output token (down) puts on each source token
    (across), on the scale of the colour bar ([0, 1] unless a weight lies outside it).  # maps[i]: (H, T_i, S_i)"""
    rows, heads = len(maps), maps[0].shape[0]
    width = max(len(s) for s in sources)
    inches = max(4.0, 1.6 + heads * (0.9 + 0.17 * width))  # the maps, the colour bar and its labels
    fig = Figure(figsize=(inches, 0.5 + rows * (0.9 + 0.2 * max(map(len, outputs)))), layout="constrained")
    axes = fig.subplots(rows, heads, squeeze=False)
    scale = weight_scale(maps)
    for r, (source, output, m) in enumerate(zip(sources, outputs, maps)):
        for h in range(heads):
            ax = axes[r, h]
            shown = ax.imshow(m[h].float(), aspect="auto", interpolation="nearest", **scale)
            ax.set_xticks(range(len(source)), [label(t) for t in source], fontsize=6)
            ax.set_yticks(range(len(output)), [label(t) for t in output], fontsize=7)
            if r == 0:
                ax.set_title(f"head {h}", fontsize=9)
    title = "cross-attention of the last decoder block: output tokens (down) x source tokens (across)"
    fig.suptitle(wrapped(title, inches, 9), fontsize=9)
    fig.colorbar(shown, ax=list(axes.flat), fraction=0.03, pad=0.01, label="attention weight")
    return fig


def caption_figure(images: Tensor, outputs: list[list[str]], right: list[bool], maps: list[Tensor] | None) -> Figure:
    """One row per image: the image titled with its predicted caption (red when wrong), then per predicted
    token the last decoder block's cross-attention over the image patches (mean over heads), upsampled to the
    image as a heat overlay (none without ``maps``).  # images (N, C, H, W); maps[i]: (H, T_i, S), S patches in
    row-major order"""
    n, _, height, width = images.shape
    columns = 1 + (max(len(o) for o in outputs) if maps is not None else 0)
    inches = columns * 0.9 * width / height + 0.5
    fig = Figure(figsize=(inches, n * 1.3 + 0.3))
    axes = fig.subplots(n, columns, squeeze=False)
    for ax in axes.flat:
        ax.set_axis_off()
    for r, (image, output, ok) in enumerate(zip(images, outputs, right)):
        gray = image.mean(0)  # (H, W)
        gray = (gray - gray.min()) / (gray.max() - gray.min()).clamp_min(1e-6)
        axes[r, 0].imshow(gray, cmap="gray")
        words = [t for t in output if not t.startswith("[")]
        caption = wrapped(" ".join(words) or "(empty)", 0.9 * width / height, 8)
        axes[r, 0].set_title(caption, fontsize=8, color="black" if ok else "red")
        if maps is None:
            continue
        m = maps[r]
        side = round((m.shape[-1] * height / width) ** 0.5)  # patch rows: the patches are square
        grid = m.float().mean(0).view(len(output), side, -1)  # (T, rows, columns)
        heat = F.interpolate(grid[None], size=(height, width), mode="nearest")[0]  # (T, H, W)
        for c, (token, h) in enumerate(zip(output, heat), start=1):
            axes[r, c].imshow(gray, cmap="gray")
            shown, style = overlay(h)
            axes[r, c].imshow(shown, alpha=0.55, **style)
            axes[r, c].set_title(token, fontsize=7)
    title = "predicted caption (red: wrong)" + (
        ", and each token's attention over the image" if maps is not None else ""
    )
    fig.suptitle(wrapped(title, inches, 9), fontsize=9)
    fig.tight_layout()
    return fig


def overlay(heat: Tensor) -> tuple[Tensor, dict]:
    """A token's attention over the image as a heat overlay scaled to its largest weight: [0, 1] of that; with a
    negative weight (signed weights) a diverging scale centred at 0, from -1 to 1 of the largest |weight|.  # (H, W)"""
    if float(heat.min()) < 0.0:
        return heat / heat.abs().max().clamp_min(1e-9), {"cmap": SIGNED_COLOURS, "vmin": -1.0, "vmax": 1.0}
    return heat / heat.max().clamp_min(1e-9), {"cmap": "inferno", "vmin": 0.0, "vmax": 1.0}
