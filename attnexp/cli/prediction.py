"""What a trained network predicts: the top-k next tokens and a continuation of a prompt (a language model), or the
output of an encoder-decoder for a source text or an image with the alternatives of a beam search. ``attnexp-predict``
(:mod:`attnexp.cli.predict`) reads a run folder and prints these reports."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from attnexp.errors import AttnexpError

if TYPE_CHECKING:  # torch is imported once a prediction is asked for
    from torch import Tensor, nn

    from attnexp.data.vocabulary import Vocabulary


def encode_prompt(prompt: str, vocab: Vocabulary, what: str = "prompt") -> Tensor:
    """Prompt (or source) ids; unknown tokens become ``[unk]`` with a warning, only unknown ones are an error.  #
    (L,)"""
    from attnexp.data.vocabulary import tokenize
    from attnexp.tokens import UNK

    tokens = tokenize(prompt, vocab.level)
    ids, unknown = vocab.encode(tokens)
    if not tokens or len(unknown) == len(tokens):
        known = ", ".join([repr(t) if vocab.level == "char" else t for t in vocab.tokens if not t.startswith("[")][:20])
        raise AttnexpError(
            f"The {what} {prompt!r} has no token the model knows ({vocab.level} level, {len(vocab)} tokens), so there "
            f"is nothing to predict from. Use {'words' if vocab.level == 'word' else 'characters'} "
            f"of the training text, e.g. {known}."
        )
    if unknown:
        print(f"warning: not in the vocabulary, read as {UNK}: {', '.join(map(repr, unknown))}", file=sys.stderr)
    return ids


def predict_next(cfg: DictConfig, net: nn.Module, vocab: Vocabulary) -> str:
    """The top-k next tokens after the prompt and a continuation."""
    from attnexp.data.vocabulary import detokenize
    from attnexp.networks.language_model import continue_ids, next_token_probs

    ids = encode_prompt(str(cfg.prompt), vocab)
    top = next_token_probs(net, ids).topk(min(cfg.top_k, len(vocab)))
    prompt = detokenize(vocab.decode(ids.tolist()), vocab.level)
    lines = [f"prompt: {prompt!r}", f"next token (top {len(top.indices)}):"]
    lines += [f"  {p:.4f}  {vocab.tokens[i]!r}" for p, i in zip(top.values.tolist(), top.indices.tolist())]
    if cfg.tokens:
        out = continue_ids(net, ids, cfg.tokens, cfg.sample, cfg.temperature, cfg.seed)
        how = f"sampled at temperature {cfg.temperature}, seed {cfg.seed}" if cfg.sample else "greedy"
        lines += [f"continuation ({how}, {cfg.tokens} tokens):", detokenize(vocab.decode(out.tolist()), vocab.level)]
    return "\n".join(lines)


def predict_sequence(cfg: DictConfig, net: nn.Module, state: dict[str, Any]) -> str:
    """The best output of a beam search for ``source=`` or ``image=``, and the top alternatives with their
    probabilities."""
    from attnexp.data.vocabulary import Vocabulary
    from attnexp.networks.decoding import beam_search

    if "src_vocab" in state:
        src_vocab = Vocabulary.from_state(state["src_vocab"])
        src, shown = encode_source(str(cfg.source), src_vocab, state["spec"]["src_len"]), repr(str(cfg.source))
    else:
        from attnexp.data.captions import canvas_from_file

        spec = state["spec"]
        src, shown = (
            canvas_from_file(str(cfg.image), spec["image_height"], spec["image_width"], state["image"]),
            str(cfg.image),
        )
    vocab = Vocabulary.from_state(state["tgt_vocab"])
    ids, scores = beam_search(net, src.unsqueeze(0), cfg.beam)
    outputs = [vocab.text(row) for row in ids[0].tolist()]
    how = "greedy" if len(outputs) == 1 else f"beam search, {len(outputs)} hypotheses"
    lines = [
        f"{'source' if 'src_vocab' in state else 'image'}: {shown}",
        f"output: {outputs[0]}",
        f"top {min(cfg.top_k, len(outputs))} ({how}):",
    ]
    lines += [f"  {p:<9.4g} {o}" for p, o in zip(scores[0].exp().tolist()[: cfg.top_k], outputs)]
    return "\n".join(lines)


def encode_source(text: str, vocab: Vocabulary, length: int) -> Tensor:
    """Source ids of ``text`` padded to the trained length; unknown tokens warn (as prompts do), a source
    longer than any the model was trained on is an error.  # (S,)"""
    import torch

    from attnexp.tokens import PAD_ID

    ids = encode_prompt(text, vocab, "source")
    if len(ids) > length:
        raise AttnexpError(
            f"The source {text!r} has {len(ids)} {vocab.level} tokens; the model was built for at most "
            f"{length} (the longest source in its data). Shorten it."
        )
    return torch.cat([ids, torch.full((length - len(ids),), PAD_ID, dtype=torch.long)])
