"""TensorBoard figures for language models: attention over a validation sentence, next-token distribution."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytorch_lightning as pl  # noqa: E402
from torch import Tensor  # noqa: E402

from attnexp.callbacks.figures import figure_writers, forward_with_weights, write_figures  # noqa: E402


def token_attention_figure(tokens: list[str], maps: list[Tensor | None]) -> plt.Figure:
    """One heatmap per layer and head, queries down and keys across, tokens on both axes.

    SE gates (L, C) are drawn with tokens down and channels across.
    """
    heads = [(i, m) for i, m in enumerate(maps) if m is not None and m.dim() == 3]  # (H, L, L)
    gates = [(i, m) for i, m in enumerate(maps) if m is not None and m.dim() < 3]  # (L, C)
    panels = [(f"layer {i} head {h}", m[h], True) for i, m in heads for h in range(m.shape[0])]
    panels += [(f"layer {i} gates", m.reshape(len(tokens), -1), False) for i, m in gates]
    side = 1.2 + 0.28 * len(tokens)
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(side * max(1, len(panels)), side), squeeze=False)
    for ax, (title, data, square) in zip(axes.flat, panels):
        ax.imshow(data.float(), cmap="viridis", aspect="auto", interpolation="nearest")
        ax.set_title(title, fontsize=9)
        ax.set_yticks(range(len(tokens)), tokens, fontsize=7)
        ax.set_ylabel("query" if square else "token", fontsize=8)
        if square:
            ax.set_xticks(range(len(tokens)), tokens, fontsize=7, rotation=90)
        ax.set_xlabel("key" if square else "channel", fontsize=8)
    fig.tight_layout()
    return fig


def next_token_figure(
    prefix: list[str], probs: Tensor, vocab: list[str], target: str | None, top_k: int = 15
) -> plt.Figure:
    """Bar chart of the ``top_k`` most likely next tokens after ``prefix``; the true next one in orange."""
    top = probs.topk(min(top_k, len(probs)))
    labels = [repr(vocab[i])[1:-1] for i in top.indices.tolist()]
    colors = ["tab:orange" if vocab[i] == target else "tab:blue" for i in top.indices.tolist()]
    fig, ax = plt.subplots(figsize=(1.0 + 0.45 * len(labels), 3.2))
    ax.bar(range(len(labels)), top.values.float(), color=colors)
    ax.set_xticks(range(len(labels)), labels, rotation=60, fontsize=8)
    ax.set_ylabel("probability")
    shown = " ".join(prefix[-8:])
    ax.set_title(f"next token after '{shown}'" + (f" (true: {target!r})" if target is not None else ""), fontsize=9)
    fig.tight_layout()
    return fig


class TokenFigures(pl.Callback):
    """Logs ``figures/attention`` and ``figures/next_token`` for a validation sentence of text data.

    Skips data modules without a vocabulary (image data has its own figures).
    """

    def __init__(self, max_tokens: int = 24, top_k: int = 15) -> None:
        self.max_tokens, self.top_k = max_tokens, top_k

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        datamodule = trainer.datamodule
        writers = figure_writers(trainer)
        if getattr(datamodule, "vocab", None) is None or not writers:
            return
        ids = datamodule.validation_sample(self.max_tokens)  # (L,)
        logits, maps = forward_with_weights(pl_module, ids.unsqueeze(0))  # (1, L, V)
        tokens = datamodule.vocab.decode(ids.tolist())
        at = max(len(tokens) - 2, 0)  # predict the sentence's last token from the rest
        target = tokens[at + 1] if len(tokens) > 1 else None
        probs = logits[0, at].softmax(-1).cpu()  # (V,)
        bars = next_token_figure(tokens[: at + 1], probs, datamodule.vocab.tokens, target, self.top_k)
        figures = {"figures/next_token": bars}
        if any(m is not None for m in maps):
            labels = [repr(t)[1:-1] for t in tokens]
            maps = [m[0].cpu() if m is not None else None for m in maps]
            figures["figures/attention"] = token_attention_figure(labels, maps)
        write_figures(writers, figures, trainer.global_step)
