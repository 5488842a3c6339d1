"""The ``attnexp-predict`` entrypoint: next-token predictions and a continuation from a trained text run."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hydra
from omegaconf import DictConfig, OmegaConf

from attnexp.cli.fast_exit import run_then_exit
from attnexp.cli.train import CONFIG_DIR, build_net
from attnexp.errors import EXIT_CODES, AttnexpError, explain

if TYPE_CHECKING:  # torch is imported once a prediction is asked for: --help answers at once
    from torch import Tensor, nn

    from attnexp.data.vocabulary import Vocabulary


def find_checkpoint(run: Path, checkpoint: str) -> Path:
    """``best`` (the run's best checkpoint by its task's metric, else ``last``), ``last``, or a path to a ``.ckpt`` file.
    A mid-epoch ``interrupted.ckpt`` is used only when named as a path."""
    folder = run / "checkpoints"
    if checkpoint == "best":
        best = (p for p in folder.glob("*.ckpt") if p.name not in ("last.ckpt", "interrupted.ckpt"))
        found = sorted(best, key=lambda p: p.stat().st_mtime) or sorted(folder.glob("last.ckpt"))
    else:
        path = folder / "last.ckpt" if checkpoint == "last" else Path(checkpoint)
        found = [path] if path.is_file() else []
    if not found:
        raise AttnexpError(
            f"No checkpoint {checkpoint!r} for run={run}: looked in {folder}. Pass the folder of a finished "
            "training run (it holds .hydra/ and checkpoints/), and checkpoint=best, last or a path to a .ckpt file."
            + (f" The run was interrupted before an epoch ended: checkpoint={folder / 'interrupted.ckpt'} loads "
               "its mid-epoch state." if (folder / "interrupted.ckpt").is_file() else "")
        )
    return found[-1]


def load_run(run: str, checkpoint: str = "best") -> tuple[nn.Module, Vocabulary]:
    """The trained network (eval mode, CPU) and vocabulary of a text run folder."""
    import torch

    from attnexp.data.vocabulary import Vocabulary

    folder = Path(run).expanduser()
    config = folder / ".hydra" / "config.yaml"
    if not config.is_file():
        raise AttnexpError(
            f"run={run} is not a run folder: {config} is missing. Pass the folder a training run wrote, "
            "e.g. run=outputs/runs/2026-01-01/12-00-00_dot_corpus."
        )
    state = torch.load(find_checkpoint(folder, checkpoint), map_location="cpu", weights_only=True)
    data_state = next((v for v in state.values() if isinstance(v, dict) and "vocab" in v), None)
    if data_state is None:
        raise AttnexpError(
            f"run={run} was not trained on text (its checkpoint holds no vocabulary). attnexp-predict works on "
            "runs of data=corpus or data=text."
        )
    vocab = Vocabulary.from_state(data_state)
    net = build_net(OmegaConf.load(config).net, {"vocab_size": len(vocab), "context": data_state["context"]})
    net.load_state_dict({k.removeprefix("net."): v for k, v in state["state_dict"].items() if k.startswith("net.")})
    return net.eval(), vocab


def encode_prompt(prompt: str, vocab: Vocabulary) -> Tensor:
    """Prompt ids; unknown tokens become ``[unk]`` with a warning, a prompt of only unknown ones is an error.  # (L,)"""
    from attnexp.data.vocabulary import tokenize

    tokens = tokenize(prompt, vocab.level)
    ids, unknown = vocab.encode(tokens)
    if not tokens or len(unknown) == len(tokens):
        known = ", ".join(vocab.tokens[1:21])
        raise AttnexpError(
            f"The prompt {prompt!r} has no token the model knows ({vocab.level} level, {len(vocab)} tokens), so there "
            f"is nothing to predict from. Use words from the training text, e.g. {known}."
        )
    if unknown:
        print(f"warning: not in the vocabulary, read as [unk]: {', '.join(map(repr, unknown))}", file=sys.stderr)
    return ids


def next_token_probs(net: nn.Module, ids: Tensor) -> Tensor:
    """Probabilities of the token after ``ids`` (the last ``net.context`` of them).  # (L,) -> (V,)"""
    import torch

    with torch.no_grad():
        return net(ids[-net.context :].unsqueeze(0))[0, -1].softmax(-1)


def continue_ids(net: nn.Module, ids: Tensor, tokens: int, sample: bool, temperature: float, seed: int) -> Tensor:
    """``tokens`` more ids after ``ids``: the most likely each time, or drawn at ``temperature``.  # (L,) -> (L+n,)"""
    import torch

    generator = torch.Generator().manual_seed(seed)
    for _ in range(tokens):
        probs = next_token_probs(net, ids)
        if sample:
            probs = (probs.log() / temperature).softmax(-1)
            nxt = torch.multinomial(probs, 1, generator=generator)
        else:
            nxt = probs.argmax().view(1)
        ids = torch.cat([ids, nxt])
    return ids


def predict(cfg: DictConfig) -> str:
    """The report ``attnexp-predict`` prints: the top-k next tokens and a continuation."""
    from attnexp.data.vocabulary import detokenize

    if cfg.top_k < 1 or cfg.tokens < 0 or not cfg.temperature > 0:
        raise AttnexpError(
            f"top_k must be >= 1, tokens >= 0 and temperature > 0; got top_k={cfg.top_k}, tokens={cfg.tokens}, "
            f"temperature={cfg.temperature}. E.g. top_k=5 tokens=10 temperature=0.8."
        )
    net, vocab = load_run(cfg.run, cfg.checkpoint)
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


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="predict")
def main(cfg: DictConfig) -> Any:
    """The Hydra app behind ``attnexp-predict`` (:func:`cli`); a bad run folder, prompt or setting gets one paragraph and exit status 2."""
    try:
        print(predict(cfg))
    except AttnexpError as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"attnexp-predict: {explain(err)}", file=sys.stderr)
        raise SystemExit(EXIT_CODES["bad_input"]) from None


def quote_run(argument: str) -> str:
    """``run=PATH`` with PATH quoted for Hydra's override grammar, which reads a sweep job's folder
    (``.../model=euclid/seed=1``) as a second ``=``; other arguments, and quoted ones, as they are."""
    key, sep, value = argument.partition("=")
    if key == "run" and sep and value[:1] not in ("'", '"') and "'" not in value:
        return f"run='{value}'"
    return argument


def cli() -> None:
    """Console script ``attnexp-predict``: :func:`main`, then a quick exit (see :mod:`attnexp.cli.fast_exit`)."""
    sys.argv[1:] = [quote_run(a) for a in sys.argv[1:]]
    run_then_exit(main)


if __name__ == "__main__":
    cli()
