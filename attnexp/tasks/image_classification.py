"""Image classification: one label per image."""

from __future__ import annotations

from typing import Any

from attnexp.rules import check
from attnexp.tasks.base import Forward, Task


class ImageClassification(Task):
    """Cross-entropy over classes; best checkpoint by ``val/acc`` by default. Figures: each layer's
    attention maps (a figure per layer, the inputs gridded and numbered by patch) over ``num_attention`` validation
    images (or squeeze-excitation gates), and a grid of ``num_predictions`` predictions. The data module provides
    ``val_dataloader()``, ``as_images(x)`` and ``patch_size``."""

    def __init__(
        self, monitor: str = "val/acc", mode: str = "max", num_attention: int = 2, num_predictions: int = 32
    ) -> None:
        super().__init__(monitor, mode)
        check("task", num_attention=num_attention, num_predictions=num_predictions)
        self.num_attention, self.num_predictions = num_attention, num_predictions

    def figures(self, forward: Forward, datamodule: Any) -> dict[str, Any]:
        from attnexp.figures.images import attention_figure, gates_figure, number_patches, prediction_figure

        n_att, n_pred = self.num_attention, self.num_predictions
        x, y = next(iter(datamodule.val_dataloader()))
        x, y = x[: max(n_att, n_pred)], y[: max(n_att, n_pred)]
        logits, maps = forward(x)
        images = datamodule.as_images(x).float()
        images = (images - images.amin()) / (images.amax() - images.amin()).clamp_min(1e-6)
        preds = logits.argmax(-1).cpu()
        figures = {"figures/predictions": prediction_figure(images[:n_pred], y[:n_pred], preds[:n_pred])}
        maps = [m[:n_att].cpu() if m is not None else None for m in maps]
        drawn = {"figures/gates": gates_figure(maps)}
        for i, m in enumerate(maps):  # a figure per layer: legible at TensorBoard's card size
            if m is not None and m.dim() == 4:
                drawn[f"figures/attention/layer{i}"] = fig = attention_figure(
                    images[:n_att], [m if j == i else None for j in range(len(maps))]
                )
                if fig is not None:  # (B, H, L, L) weights: always drawn
                    number_patches(fig, datamodule.patch_size, m.shape[-1])
        return figures | {tag: fig for tag, fig in drawn.items() if fig is not None}
