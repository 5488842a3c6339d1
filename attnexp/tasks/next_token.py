"""Next-token prediction: a label per position of a token window."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor

from attnexp.rules import check
from attnexp.tasks.base import Forward, Task


class NextToken(Task):
    """Cross-entropy of every next token; also logs perplexity ``<stage>/ppl`` = exp(mean loss).

    Best checkpoint by ``val/loss`` (lowest) by default: next-token accuracy ties
    often between epochs whose perplexities differ. Figures: each head's attention
    over a validation sentence of at most ``max_tokens`` tokens, and the ``top_k``
    most likely next tokens where the model is least sure (highest entropy). The data module provides ``vocab`` and
    ``validation_sample(max_tokens)``.
    """

    summary: ClassVar[dict[str, str]] = {"test/ppl": "min", "val/loss": "min", "test/acc": "max"}
    causal: ClassVar[bool] = True

    def __init__(self, monitor: str = "val/loss", mode: str = "min", max_tokens: int = 24, top_k: int = 15) -> None:
        super().__init__(monitor, mode)
        check("task", max_tokens=max_tokens, top_k=top_k)
        self.max_tokens, self.top_k = max_tokens, top_k

    def derived(self, stage: str, loss: Tensor) -> dict[str, Tensor]:
        return {f"{stage}/ppl": loss.exp()}

    def figures(self, forward: Forward, datamodule: Any) -> dict[str, Any]:
        from attnexp.figures.tokens import next_token_figure, token_attention_figure

        ids = datamodule.validation_sample(self.max_tokens)  # (L,)
        logits, maps = forward(ids.unsqueeze(0))  # (1, L, V)
        tokens = datamodule.vocab.decode(ids.tolist())
        probs = logits[0].softmax(-1).cpu()  # (L, V)
        entropy = -(probs * probs.clamp_min(1e-12).log()).sum(-1)  # (L,)
        at = int(
            entropy[: max(len(tokens) - 1, 1)].argmax()
        )  # a position whose next token is known, the least sure one
        target = tokens[at + 1] if at + 1 < len(tokens) else None
        bars = next_token_figure(
            tokens[: at + 1], probs[at], datamodule.vocab.tokens, target, self.top_k, float(entropy[at])
        )
        figures = {"figures/next_token": bars}
        if any(m is not None for m in maps):
            labels = [repr(t)[1:-1] for t in tokens]
            maps = [m[0].cpu() if m is not None else None for m in maps]
            later = torch.ones(len(labels), len(labels), dtype=torch.bool).triu(1)  # the language model is causal
            figures["figures/attention"] = token_attention_figure(labels, maps, masked=later)
        return figures
