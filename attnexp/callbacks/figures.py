"""TensorBoard figures at the end of training: attention maps and a prediction grid."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytorch_lightning as pl  # noqa: E402
import torch  # noqa: E402
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


class AttentionFigures(pl.Callback):
    """Logs ``figures/attention`` and ``figures/predictions`` for a few validation samples."""

    def __init__(self, num_attention: int = 4, num_predictions: int = 32) -> None:
        self.num_attention, self.num_predictions = num_attention, num_predictions

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        datamodule = trainer.datamodule
        writers = figure_writers(trainer)
        if not hasattr(datamodule, "as_images") or not writers:
            return
        n_att, n_pred = self.num_attention, self.num_predictions
        x, y = next(iter(datamodule.val_dataloader()))
        x, y = x[: max(n_att, n_pred)], y[: max(n_att, n_pred)]
        logits, maps = forward_with_weights(pl_module, x)
        images = datamodule.as_images(x).float()
        images = (images - images.amin()) / (images.amax() - images.amin()).clamp_min(1e-6)
        preds = logits.argmax(-1).cpu()
        figures = {"figures/predictions": prediction_figure(images[:n_pred], y[:n_pred], preds[:n_pred])}
        if any(m is not None for m in maps):
            maps = [m[:n_att].cpu() if m is not None else None for m in maps]
            figures["figures/attention"] = attention_figure(images[:n_att], maps)
        write_figures(writers, figures, trainer.global_step)


def figure_writers(trainer: pl.Trainer) -> list:
    """The loggers' writers that take matplotlib figures (TensorBoard); none off rank zero."""
    if not trainer.is_global_zero:
        return []
    return [lg.experiment for lg in trainer.loggers if hasattr(lg.experiment, "add_figure")]


def forward_with_weights(pl_module: pl.LightningModule, x: Tensor) -> tuple[Tensor, list[Tensor | None]]:
    """The network in eval mode on ``x`` at the trainer's precision, returning float32 logits and each
    layer's weights; its mode is restored."""
    net, precision = pl_module.net, pl_module.trainer.precision_plugin
    was_training = net.training
    net.eval()
    with torch.no_grad(), precision.forward_context():
        logits, maps = net(precision.convert_input(x.to(pl_module.device)), need_weights=True)
    net.train(was_training)
    return logits.float(), [m if m is None else m.float() for m in maps]


def write_figures(writers: list, figures: dict[str, plt.Figure], step: int) -> None:
    """Add every figure under its tag to every writer, then free it."""
    for tag, fig in figures.items():
        for writer in writers:
            writer.add_figure(tag, fig, global_step=step)
        plt.close(fig)
