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
    rows, cols = len(images), 1 + len(panels)
    fig, axes = plt.subplots(rows, cols, figsize=(2.2 * cols, 2.2 * rows), squeeze=False)
    for r in range(rows):
        axes[r, 0].imshow(images[r].permute(1, 2, 0).squeeze(-1), cmap="gray")
        axes[r, 0].set_title("input", fontsize=8)
        for c, (title, data) in enumerate(panels, start=1):
            axes[r, c].imshow(data[r].float(), cmap="viridis", aspect="auto")
            axes[r, c].set_title(title, fontsize=8)
    for ax in axes.flat:
        ax.set_xticks([]), ax.set_yticks([])
    fig.tight_layout()
    return fig


def prediction_figure(images: Tensor, targets: Tensor, preds: Tensor, columns: int = 8) -> plt.Figure:
    """Grid of images titled ``true/pred``; wrong predictions in red."""
    rows = -(-len(images) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(1.4 * columns, 1.5 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, image, t, p in zip(axes.flat, images, targets.tolist(), preds.tolist()):
        ax.imshow(image.permute(1, 2, 0).squeeze(-1), cmap="gray")
        ax.set_title(f"{t}/{p}", fontsize=9, color="black" if t == p else "red")
    fig.tight_layout()
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
