"""Decoding an encoder-decoder (:class:`~attnexp.networks.seq2seq.Seq2Seq`): greedy and beam search, batched.

Both re-run the decoder on the whole prefix at every step (no cache), so they work for every mixer,
squeeze-excitation's running mean included; the sequences are short. Only the last position goes through the
output layer.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnexp.tokens import BOS_ID, EOS_ID, PAD_ID


def trim(ids: Tensor) -> Tensor:
    """``[pad]`` after the first ``[eos]`` of each row.  # (B, T)"""
    eos = (ids == EOS_ID).long()
    return ids.masked_fill((eos.cumsum(1) - eos) > 0, PAD_ID)


def steps_for(net: Any, max_tokens: int | None) -> int:
    """Output tokens to decode at most: the trained target length without ``[bos]``, or fewer."""
    return net.tgt_len - 1 if max_tokens is None else min(max_tokens, net.tgt_len - 1)


@torch.no_grad()
def greedy(net: Any, src: Tensor, max_tokens: int | None = None, real: Tensor | None = None) -> Tensor:
    """The most likely next token at every step, until ``[eos]``: ids (B, T) without ``[bos]``, ``[pad]`` after
    ``[eos]``."""
    memory, mask, _ = net.encode(src, real)
    out = torch.full((len(memory), 1), BOS_ID, dtype=torch.long, device=memory.device)  # (B, 1)
    done = torch.zeros(len(memory), dtype=torch.bool, device=memory.device)
    for _ in range(steps_for(net, max_tokens)):
        nxt = net.next_logits(out, memory, mask).argmax(-1).masked_fill(done, PAD_ID)  # (B,)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == EOS_ID
        if bool(done.all()):
            break
    return out[:, 1:]


@torch.no_grad()
def beam_search(
    net: Any, src: Tensor, beam: int, max_tokens: int | None = None, real: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The ``beam`` most likely outputs of every source, best first: ids (B, K, T) without ``[bos]`` and their
    log-probabilities (B, K), the sum over their tokens up to ``[eos]`` (no length penalty). A finished
    hypothesis keeps its score; beam size 1 is greedy decoding. K is ``beam``, or the number of tokens that
    can follow (all but ``[pad]`` and ``[bos]``) where that is smaller."""
    memory, mask, _ = net.encode(src, real)
    b, k = len(memory), min(beam, net.num_classes - 2)
    memory = memory.repeat_interleave(k, 0)  # (B*K, S, C)
    mask = None if mask is None else mask.repeat_interleave(k, 0)
    seqs = torch.full((b * k, 1), BOS_ID, dtype=torch.long, device=memory.device)  # (B*K, 1)
    scores = torch.zeros(b, k, device=memory.device)
    scores[:, 1:] = float("-inf")  # one live hypothesis per source at the start
    done = torch.zeros(b * k, dtype=torch.bool, device=memory.device)
    for _ in range(steps_for(net, max_tokens)):
        logp = net.next_logits(seqs, memory, mask).float().log_softmax(-1)  # (B*K, V)
        finished = torch.full_like(logp[:1], float("-inf"))
        finished[:, PAD_ID] = 0.0  # a finished hypothesis can only grow by [pad], at no cost
        logp = torch.where(done[:, None], finished, logp)
        vocab = logp.shape[-1]
        top = (scores.reshape(-1, 1) + logp).view(b, k * vocab).topk(k, dim=-1)  # (B, K)
        rows = (torch.arange(b, device=memory.device)[:, None] * k + top.indices // vocab).flatten()  # (B*K,)
        token = (top.indices % vocab).flatten()
        seqs, scores = torch.cat([seqs[rows], token[:, None]], dim=1), top.values
        done = done[rows] | (token == EOS_ID)
        if bool(done.all()):
            break
    return seqs[:, 1:].view(b, k, -1), scores
